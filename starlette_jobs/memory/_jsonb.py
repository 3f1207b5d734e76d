"""JSON as PostgreSQL's jsonb keeps it, for the memory store to give back and compare what the
PostgreSQL store would: a number is a `numeric`, which writes `1e20` out in full, keeps the
scale it was written with (`1.50`), and knows no negative zero; `true` is not `1`."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any


def jsonb_text(text: str) -> str:
    """A JSON text in the form jsonb gives it back (its numbers as `numeric` writes them, its
    characters unescaped); keys are left in their order, where jsonb sorts them."""
    floats = False

    def exact(number: str) -> Decimal:
        nonlocal floats
        floats = True
        return Decimal(number)

    value = json.loads(text, parse_float=exact)
    return _written(value, sort_keys=False) if floats else json.dumps(value, ensure_ascii=False)


def jsonb_field_text(payload: str, field: str) -> str | None:
    """`payload ->> field`: a string as itself, a missing field or null as None, any other
    value as its JSON text, an object's keys in one order (jsonb keeps none)."""
    value = json.loads(payload, parse_float=Decimal).get(field)
    if value is None or isinstance(value, str):
        return value
    return _written(value, sort_keys=True)


def jsonb_value(text: str) -> Any:
    """JSON text as a value that compares as jsonb does: numbers exact (`Decimal`), and true
    and false apart from 1 and 0 (which Python's `==` confuses)."""

    def mark_booleans(value: Any) -> Any:
        if isinstance(value, bool):
            return (bool, value)
        if isinstance(value, dict):
            return {key: mark_booleans(item) for key, item in value.items()}
        if isinstance(value, list):
            return [mark_booleans(item) for item in value]
        return value

    return mark_booleans(json.loads(text, parse_float=Decimal))


def _written(value: Any, *, sort_keys: bool) -> str:
    """`json.dumps(value)` as jsonb writes it: its `Decimal` numbers as `numeric` writes them,
    other characters than ASCII as themselves."""
    if isinstance(value, Decimal):
        return format(abs(value) if value.is_zero() else value, "f")
    if isinstance(value, dict):
        items = sorted(value.items()) if sort_keys else value.items()
        fields = (
            f"{json.dumps(key, ensure_ascii=False)}: {_written(item, sort_keys=sort_keys)}"
            for key, item in items
        )
        return "{" + ", ".join(fields) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_written(item, sort_keys=sort_keys) for item in value) + "]"
    return json.dumps(value, ensure_ascii=False)
