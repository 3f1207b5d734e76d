"""The commands' tables, JSON lines and cells (`cli/_output.py`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from starlette_jobs.cli._output import Exit, one_line, print_json_lines, print_table, when


def test_a_table_pads_each_column_to_its_widest_cell(capsys: pytest.CaptureFixture[str]) -> None:
    print_table(("ID", "NAME"), [("1", "mail.send"), ("100", "x")])
    assert capsys.readouterr().out.splitlines() == ["ID   NAME", "1    mail.send", "100  x"]


def test_json_lines_are_one_object_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    at = datetime(2026, 11, 26, tzinfo=UTC)
    print_json_lines([{"a": 1}, {"at": at}])
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line) for line in lines] == [{"a": 1}, {"at": str(at)}]


def test_cells_are_one_short_line() -> None:
    assert when(None) == "-"
    assert when(datetime(2026, 11, 26, 1, 2, 3, 456, tzinfo=UTC)) == "2026-11-26 01:02:03+00:00"
    assert one_line(None) == "-"
    assert one_line("  \n") == "-"
    assert one_line("x" * 100, width=10) == "x" * 9 + "…"


def test_an_error_cell_is_the_last_line_of_its_traceback() -> None:
    # What a job raised is its traceback's last line; its first is the same for every job.
    traceback = 'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: bad\n\n'
    assert one_line(traceback) == "ValueError: bad"
    assert one_line("lease expired") == "lease expired"


def test_a_tables_cells_show_control_characters_as_escapes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Stored text is user input: ESC, BEL, DEL, C1 or a newline would drive the terminal or
    # break the row. Escaped before the columns are measured, so they stay aligned.
    print_table(("A", "B"), [("\x1b[2J\x07", "x"), ("\x9b\x7f\t\r\n\x00", "y")])
    first, second = r"\x1b[2J\x07", r"\x9b\x7f\t\r\n\x00"
    assert capsys.readouterr().out.splitlines() == [
        f"{'A':<{len(second)}}  B",
        f"{first:<{len(second)}}  x",
        f"{second}  y",
    ]


def test_the_exit_statuses_a_script_can_rely_on() -> None:
    assert [int(code) for code in Exit] == [0, 1, 2, 3, 4, 74, 130, 141]
