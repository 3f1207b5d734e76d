"""A time bound as an operator types it (the dashboard's `since=`, `starlette-jobs list
--since`): the jobs that finished at or after a time, given as an age ("90s", "30m", "1h",
"2d", "1w": that long before now) or an ISO 8601 time (with its offset; one without is read as
UTC)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_AGE = re.compile(r"(\d{1,9})([smhdw])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
# Further back than any job can have finished: a bound past it is a typing slip (and past
# timedelta's range, "999999999w" would overflow).
_LONGEST = 100 * 365 * 86_400


class SinceError(ValueError):
    """A `since=` that is neither an age nor a time: the page says which."""


def finished_after(text: str, now: datetime) -> datetime:
    """The time `text` names, an age before `now` or an ISO 8601 time.

    Raises:
        SinceError: text that is neither.
    """
    text = text.strip()
    if (age := _AGE.fullmatch(text.lower())) is not None:
        seconds = int(age.group(1)) * _SECONDS[age.group(2)]
        if seconds > _LONGEST:
            raise SinceError(f"since must be within 100 years, got {text!r}")
        return now - timedelta(seconds=seconds)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise SinceError(
            f"since must be an age (30m, 1h, 2d) or an ISO 8601 time, got {text[:40]!r}"
        ) from None
    when = when if when.utcoffset() is not None else when.replace(tzinfo=UTC)
    try:
        when.astimezone(UTC)  # what the database stores: a year 1 with an offset is past it
    except OverflowError:
        raise SinceError(f"since is out of range, got {text[:40]!r}") from None
    return when
