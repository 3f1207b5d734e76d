"""The memory store's jsonb (`memory/_jsonb.py`) against PostgreSQL's own: the same texts given
back, the same `->>` keys. What the stores then do with them: contract/test_controls_contract.py
(key limits) and the payloads every contract test reads back."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from starlette_jobs.memory._jsonb import jsonb_field_text, jsonb_text

# Keys already in jsonb's order (shorter first), which the memory store does not reorder.
TEXTS = [
    '{"n": 1e20}',
    '{"n": -0.0}',
    '{"n": 1.50}',
    '{"n": 1.0E2}',
    '{"n": 2.5e-3}',
    '{"n": 0.1000000000000000000001}',
    '{"n": -0}',
    '{"n": 123456789012345678901234567890}',
    '{"a": [1e2, {"b": -0.0}], "bé": "é"}',
    '{"m": null, "n": true}',
]


@pytest.mark.parametrize("text", TEXTS)
async def test_a_text_is_given_back_as_jsonb_gives_it(
    connection: asyncpg.Connection[Any], text: str
) -> None:
    expected = await connection.fetchval("SELECT $1::jsonb::text", text)
    assert jsonb_text(text) == expected


@pytest.mark.parametrize("text", TEXTS)
async def test_a_field_reads_as_its_arrow_text(
    connection: asyncpg.Connection[Any], text: str
) -> None:
    for field in ("n", "a", "missing"):
        expected = await connection.fetchval("SELECT $1::jsonb ->> $2", text, field)
        assert jsonb_field_text(text, field) == expected, field
