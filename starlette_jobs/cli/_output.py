"""How the commands print: tables for people (columns padded to their widest cell), JSON lines
for scripts, and the exit statuses a script can rely on."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from enum import IntEnum
from typing import Any

from .._errors import last_line


class Exit(IntEnum):
    """`starlette-jobs`'s exit statuses (docs/cli.md)."""

    OK = 0
    UNCHANGED = 1
    """An action that changed nothing: the job's status does not allow it (retry a job that
    succeeded, cancel one that finished, release one that is not running)."""
    USAGE = 2
    """A mistake in the command line or the configuration (argparse's own status too)."""
    NOT_FOUND = 3
    """No job has the id given."""
    UNAVAILABLE = 4
    """The database could not be reached, or did not answer in time: try again later."""


def print_table(columns: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    """`columns`, then each row, each cell padded to its column's widest."""
    table = [tuple(columns), *(tuple(row) for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(columns))]
    for row in table:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        print("  ".join(cells).rstrip())


def print_json_lines(items: Iterable[dict[str, Any]]) -> None:
    """One JSON object a line (what `jq -c` reads and writes)."""
    for item in items:
        print(json.dumps(item, default=str))


def when(at: datetime | None) -> str:
    """A timestamp for a table: to the second, `-` when there is none."""
    return "-" if at is None else at.isoformat(sep=" ", timespec="seconds")


def one_line(error: str | None, width: int = 60) -> str:
    """What a stored error says (`last_line`: not its traceback's first line, the same for
    every error), cut to `width` characters, for a table's cell; `-` for none."""
    said = last_line(error) or "-"
    return said if len(said) <= width else said[: width - 1] + "…"
