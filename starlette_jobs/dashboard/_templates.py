"""The templates and what they format with: the one module that imports jinja2 (the
`dashboard` extra)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._errors import last_line

try:
    import jinja2
    from starlette.templating import Jinja2Templates
except ImportError as error:  # pragma: no cover - the extra is part of the dev install
    raise ImportError("the dashboard needs jinja2: install `starlette-jobs[dashboard]`") from error

HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"


def templates() -> Jinja2Templates:
    """The dashboard's templates, escaping every value (a job's arguments are user input)."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,  # a misspelt field fails the tests, not the page
    )
    environment.filters["age"] = age
    environment.filters["when"] = when
    environment.filters["pretty"] = pretty
    environment.filters["last_line"] = last_line
    return Jinja2Templates(env=environment)


def age(moment: datetime | None, now: datetime | None = None) -> str:
    """How long ago `moment` was, to the second, the largest two units: "3m 07s", "2h 05m";
    "in 4s" for a moment still to come; "" for none."""
    if moment is None:
        return ""
    seconds = int(((now or datetime.now(UTC)) - moment).total_seconds())
    ahead = seconds < 0
    seconds = abs(seconds)
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, seconds = divmod(rest, 60)
    if days:
        text = f"{days}d {hours:02d}h"
    elif hours:
        text = f"{hours}h {minutes:02d}m"
    elif minutes:
        text = f"{minutes}m {seconds:02d}s"
    else:
        text = f"{seconds}s"
    return f"in {text}" if ahead else text


def when(moment: datetime | str | None) -> str:
    """A timestamp in UTC, to the second: what the operator compares with logs. Text is an
    ISO 8601 timestamp (a job's `errors` hold them so), shown as it is if it is not one."""
    if moment is None:
        return ""
    if isinstance(moment, str):
        try:
            return when(datetime.fromisoformat(moment))
        except ValueError:
            return moment
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def pretty(value: Any) -> str:
    """A JSON value indented for reading; what JSON cannot hold is shown as its text."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
