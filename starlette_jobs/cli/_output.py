"""How the commands print: tables for people (columns padded to their widest cell), JSON lines
for scripts, and the exit statuses a script can rely on."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from enum import IntEnum
from typing import Any, TextIO

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
    OUTPUT_FAILED = 74
    """The output could not be written (a full disk, `> /dev/full`): sysexits' EX_IOERR."""
    INTERRUPTED = 130
    """Ctrl-C (SIGINT) stopped a command other than `worker` (which shuts down and exits 0)."""
    PIPE_CLOSED = 141
    """What stdout was piped to stopped reading (`| head`): a shell's status for a command
    killed by SIGPIPE."""


class OutputFailed(Exception):
    """Writing the command's output failed (`OSError` of stdout, not a closed pipe's): told
    apart from the `OSError`s of connecting, which mean something else entirely."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error.strerror or str(error))


class GuardedOutput:
    """`stream` whose failed writes raise `OutputFailed` (a closed pipe's `BrokenPipeError`
    stays as it is: the reader went away, which is no failure)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as error:
            raise OutputFailed(error) from error

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as error:
            raise OutputFailed(error) from error

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding...: the stream's
        return getattr(self._stream, name)


# C0 (ESC, which starts every terminal escape sequence, BEL, CR, ...), DEL and C1 (0x9b is a
# CSI on its own for some terminals).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def visible(text: str, *, multi_line: bool = False) -> str:
    """`text` with each control character shown as its Python escape (`\\x1b`, `\\n`): what
    the commands print is stored text, often user input (a job's arguments end up in its
    error), which must not clear the operator's screen, retitle the window, hide or overwrite
    text. `multi_line` keeps the newlines of a field printed on several lines on purpose."""

    def escaped(found: re.Match[str]) -> str:
        char = found[0]
        return char if multi_line and char == "\n" else repr(char)[1:-1]

    return _CONTROL.sub(escaped, text)


def print_table(columns: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    """`columns`, then each row, each cell made `visible` and padded to its column's widest."""
    table = [tuple(columns), *(tuple(map(visible, row)) for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(columns))]
    for row in table:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        print("  ".join(cells).rstrip())


def print_fields(fields: Sequence[tuple[str, str]], *, multi_line: Collection[str] = ()) -> None:
    """Each `(label, value)` on its line, values aligned and made `visible`; the values of the
    labels in `multi_line` (a traceback) keep their newlines."""
    width = max(len(label) for label, _ in fields)
    for label, value in fields:
        print(f"{label:<{width}}  {visible(value, multi_line=label in multi_line)}")


def print_json_lines(items: Iterable[dict[str, Any]]) -> None:
    """One JSON object a line (what `jq -c` reads and writes); JSON escapes every control
    character itself."""
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
