"""`_since`: a time bound as an operator types it, an age before now or an ISO 8601 time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from starlette_jobs._since import SinceError, finished_after

NOW = datetime(2026, 11, 26, 7, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "ago"),
    [
        ("90s", timedelta(seconds=90)),
        ("30m", timedelta(minutes=30)),
        (" 1h ", timedelta(hours=1)),
        ("2D", timedelta(days=2)),
        ("1w", timedelta(weeks=1)),
        ("0m", timedelta()),
    ],
)
def test_an_age_is_that_long_before_now(text: str, ago: timedelta) -> None:
    assert finished_after(text, NOW) == NOW - ago


def test_an_iso_time_is_read_with_its_offset_or_as_utc() -> None:
    paris = timezone(timedelta(hours=1))
    assert finished_after("2026-11-26T06:30:00+01:00", NOW) == datetime(
        2026, 11, 26, 6, 30, tzinfo=paris
    )
    assert finished_after("2026-11-26 06:30", NOW) == datetime(2026, 11, 26, 6, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    "text",
    ["", "h", "1", "-1h", "1y", "1.5h", "yesterday", "9999999999h", "999999999w", "36501d",
     "0001-01-01T00:00+05:00", "1h; DROP TABLE starlette_jobs", "x" * 10_000],
)  # fmt: skip
def test_what_is_neither_an_age_nor_a_time_is_refused(text: str) -> None:
    with pytest.raises(SinceError, match="since"):
        finished_after(text, NOW)
