"""JSON as PostgreSQL's jsonb keeps it, for the memory store to give back and compare what the
PostgreSQL store would: a number is a `numeric`, which writes `1e20` out in full, keeps the
scale it was written with (`1.50`), and knows no negative zero; `true` is not `1`; an object's
keys come back shortest first, then in byte order (`{"b": 1, "aa": 2}`), whatever order they
were written in."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any


def jsonb_text(text: str) -> str:
    """A JSON text in the form jsonb gives it back: its numbers as `numeric` writes them, its
    characters unescaped, its keys in jsonb's order."""
    return _written(json.loads(text, parse_float=Decimal))


def timestamptz_json(at: datetime) -> str:
    """A timestamptz as PostgreSQL writes it into JSON in a UTC session: the fraction of a
    second without its trailing zeros, none at all for a whole second."""
    at = at.astimezone(UTC)
    fraction = f".{at.microsecond:06d}".rstrip("0") if at.microsecond else ""
    return f"{at:%Y-%m-%dT%H:%M:%S}{fraction}+00:00"


def jsonb_order(key: str) -> tuple[int, bytes]:
    """Where jsonb puts an object's key: the shortest first, then by their bytes."""
    encoded = key.encode()
    return len(encoded), encoded


def jsonb_field_text(payload: str, field: str) -> str | None:
    """`payload ->> field`: a string as itself, a missing field or null as None, any other
    value as its JSON text, an object's keys in one order (jsonb keeps none)."""
    value = json.loads(payload, parse_float=Decimal).get(field)
    if value is None or isinstance(value, str):
        return value
    return _written(value)


def jsonb_value(text: str) -> Any:
    """JSON text as a value that compares as jsonb does: numbers exact (`Decimal`), and true
    and false apart from 1 and 0 (which Python's `==` confuses)."""
    return booleans_apart(json.loads(text, parse_float=Decimal))


def booleans_apart(value: Any) -> Any:
    """A JSON value whose booleans compare unequal to numbers, as JSON tells `true` from `1`;
    Python's `==` does not."""
    if isinstance(value, bool):
        return (bool, value)
    if isinstance(value, dict):
        return {key: booleans_apart(item) for key, item in value.items()}
    if isinstance(value, list):
        return [booleans_apart(item) for item in value]
    return value


def _written(value: Any) -> str:
    """`json.dumps(value)` as jsonb writes it: its `Decimal` numbers as `numeric` writes them,
    other characters than ASCII as themselves, its keys in jsonb's order."""
    if isinstance(value, Decimal):
        return format(abs(value) if value.is_zero() else value, "f")
    if isinstance(value, dict):
        fields = (
            f"{json.dumps(key, ensure_ascii=False)}: {_written(value[key])}"
            for key in sorted(value, key=jsonb_order)
        )
        return "{" + ", ".join(fields) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_written(item) for item in value) + "]"
    return json.dumps(value, ensure_ascii=False)
