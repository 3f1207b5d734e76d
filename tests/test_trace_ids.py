"""`_trace_ids`: a job's trace id and correlation id read from what was stored with it, and the
trace id a filter names, checked."""

from __future__ import annotations

import json

import pytest

from starlette_jobs._trace_ids import stored_ids, trace_id_filter

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


def test_both_ids_are_read_from_the_stored_carrier() -> None:
    stored = json.dumps({"traceparent": TRACEPARENT, "x-request-id": "req-1", "baggage": "a=b"})
    assert stored_ids(stored) == (TRACE_ID, "req-1")


def test_a_request_without_a_trace_keeps_its_correlation_id_only() -> None:
    assert stored_ids('{"x-request-id": "req-2"}') == (None, "req-2")
    assert stored_ids(json.dumps({"traceparent": TRACEPARENT})) == (TRACE_ID, None)


@pytest.mark.parametrize(
    "stored",
    [
        None,
        "",
        "not json",
        "[1, 2]",
        '{"traceparent": 5, "x-request-id": 6}',
        '{"traceparent": "00-short-00f067aa0ba902b7-01"}',
        '{"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}',
        '{"traceparent": "garbage"}',
        "[" * 100_000,
    ],
)
def test_what_was_stored_by_other_means_reads_as_no_ids(stored: str | None) -> None:
    assert stored_ids(stored) == (None, None)


def test_a_trace_id_filter_is_lowercased_and_stripped() -> None:
    assert trace_id_filter(f"  {TRACE_ID.upper()} ") == TRACE_ID
    assert trace_id_filter(None) is None


@pytest.mark.parametrize("text", ["", "xyz", TRACE_ID[:-1], TRACE_ID + "0", "0" * 32, "g" * 32])
def test_what_is_no_trace_id_is_refused_naming_what_one_is(text: str) -> None:
    with pytest.raises(ValueError, match="a trace id is 32 hex digits"):
        trace_id_filter(text)
