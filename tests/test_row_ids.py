"""`row_id_of`: what may name a row (a job, a workflow, a bulk action), the same on both stores.
Through `Jobs`: integration/test_bad_input.py."""

from __future__ import annotations

import pytest

from starlette_jobs._row_ids import MAX_ROW_ID, row_id_of


@pytest.mark.parametrize("value", [1, "1", MAX_ROW_ID, str(MAX_ROW_ID), "0042"])
def test_an_int_or_its_ascii_digits_within_bigint_name_a_row(value: object) -> None:
    assert row_id_of(value) == int(str(value))


@pytest.mark.parametrize(
    "value",
    [0, -1, MAX_ROW_ID + 1, str(MAX_ROW_ID + 1), True, False, 1.0, 1.5, "", "abc", " 1",
     "+1", "1.0", "\\u0661", "9" * 400, b"1", None],
)  # fmt: skip
def test_what_no_row_can_have_names_none(value: object) -> None:
    assert row_id_of(value) is None
