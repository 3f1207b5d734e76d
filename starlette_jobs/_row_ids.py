"""What may name a row: a job's, a workflow's or a bulk action's id, all `bigint` identities
counted from 1. An id that no row can have is refused here, on both stores alike, before a store
sees it: PostgreSQL would take `True` or `1.5` for row 1, and fail on `"abc"` with its own error."""

from __future__ import annotations

MAX_ROW_ID = 2**63 - 1


def row_id_of(value: object) -> int | None:
    """The row id `value` names, or None when no row can have it: an int (not a bool) or the
    ASCII digits of one (an id that went through a URL), within `bigint`."""
    if type(value) is int:
        found = value
    elif isinstance(value, str) and len(value) <= 19 and value.isascii() and value.isdigit():
        found = int(value)
    else:
        return None
    return found if 1 <= found <= MAX_ROW_ID else None
