"""The dashboard's formatting: ages, timestamps, JSON and errors as the pages show them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from starlette_jobs._errors import last_line
from starlette_jobs.dashboard._templates import age, pretty, when

NOW = datetime(2026, 11, 26, 3, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("ago", "shown"),
    [
        (timedelta(seconds=0), "0s"),
        (timedelta(seconds=59), "59s"),
        (timedelta(minutes=3, seconds=7), "3m 07s"),
        (timedelta(hours=2, minutes=5, seconds=59), "2h 05m"),
        (timedelta(days=3, hours=1), "3d 01h"),
        (timedelta(seconds=-4), "in 4s"),
        (timedelta(minutes=-61), "in 1h 01m"),
    ],
)
def test_an_age_is_its_two_largest_units(ago: timedelta, shown: str) -> None:
    assert age(NOW - ago, NOW) == shown


def test_no_moment_is_shown_as_nothing() -> None:
    assert (age(None), when(None), last_line(None)) == ("", "", "")


def test_a_timestamp_is_shown_in_utc_to_the_second() -> None:
    paris = timezone(timedelta(hours=1))
    assert when(datetime(2026, 11, 26, 4, 0, 1, 999_000, tzinfo=paris)) == "2026-11-26 03:00:01 UTC"


def test_a_timestamp_in_text_is_read_and_other_text_is_kept() -> None:
    assert when("2026-11-26T03:00:57.284264+00:00") == "2026-11-26 03:00:57 UTC"
    assert when("yesterday") == "yesterday"


def test_json_is_indented_sorted_and_keeps_what_json_cannot_hold() -> None:
    assert pretty({"b": [1], "a": "é"}) == '{\n  "a": "é",\n  "b": [\n    1\n  ]\n}'
    assert pretty({"at": NOW}) == '{\n  "at": "2026-11-26 03:00:00+00:00"\n}'


def test_an_error_is_shown_by_its_last_line() -> None:
    traceback = 'Traceback (most recent call last):\n  File "x.py"\nKeyError: 3\n\n'
    assert last_line(traceback) == "KeyError: 3"
