"""A job's trace id and correlation id, read from the context stored with it at enqueue
(`_tracing.py`: a JSON carrier holding the W3C `traceparent` and the `x-request-id`), and the
trace id a filter asks for, checked. No OpenTelemetry here: reading a record must not need it.
"""

from __future__ import annotations

import json
from typing import Any

CORRELATION_ID_KEY = "x-request-id"
"""The carrier's key for the correlation id, the header the web middleware reads it from."""

_HEX = frozenset("0123456789abcdef")
_INVALID_TRACE_ID = "0" * 32


def stored_ids(stored_context: str | None) -> tuple[str | None, str | None]:
    """The trace id (32 lowercase hex digits) and the correlation id of a stored context;
    None for either that is missing or malformed (a row written by other means)."""
    if not stored_context:
        return None, None
    try:
        carrier: Any = json.loads(stored_context)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(carrier, dict):
        return None, None
    correlation = carrier.get(CORRELATION_ID_KEY)
    return (
        _trace_id_of(carrier.get("traceparent")),
        correlation if isinstance(correlation, str) else None,
    )


def _trace_id_of(traceparent: object) -> str | None:
    """The trace id of a W3C traceparent: `version-traceid-parentid-flags`."""
    if not isinstance(traceparent, str):
        return None
    parts = traceparent.split("-")
    if len(parts) < 4:
        return None
    trace_id = parts[1]
    return trace_id if _is_trace_id(trace_id) else None


def trace_id_filter(text: str | None) -> str | None:
    """The trace id a filter names, lowercased (as traceparent holds it); None for none.

    Raises:
        ValueError: text that is no trace id (32 hex digits, not all zero).
    """
    if text is None:
        return None
    trace_id = text.strip().lower()
    if not _is_trace_id(trace_id):
        raise ValueError(f"a trace id is 32 hex digits, got {text!r}")
    return trace_id


def _is_trace_id(text: str) -> bool:
    return len(text) == 32 and _HEX.issuperset(text) and text != _INVALID_TRACE_ID
