"""The cheap test that keeps enqueue fast, against the exact one it stands in for."""

from __future__ import annotations

import json

import pytest

from starlette_jobs._storable import MAX_DEPTH, json_problems, may_be_unstorable


def nested(depth: int) -> object:
    value: object = 0
    for _ in range(depth):
        value = [{"k": "[[[[", "v": value}] if depth % 2 else [value]
    return value


def nested_around(depth: int, before: str, after: str) -> object:
    value: object = 0
    for _ in range(depth):
        value = [before, value, after]
    return value


WIDE = {"items": [{"id": n, "tags": ["a", "b"]} for n in range(200)]}


@pytest.mark.parametrize(
    "value",
    [
        WIDE,  # 400 containers side by side: no slow path for a common payload
        {"text": "[" * 500 + "{" * 500},  # brackets inside strings do not nest
        {"a": '\\"[' * 100, "b": "\\", "c": '"' + "]" * 100},  # nor behind escaped quotes
        [[[0]] * 10] * 10,
        nested(MAX_DEPTH),
        {"n": 10**4299, "s": "9" * 4300},
    ],
    ids=[
        "wide",
        "brackets in a string",
        "escaped quotes",
        "square",
        "as deep as allowed",
        "long numbers",
    ],
)
def test_what_is_storable_takes_the_fast_path(value: object) -> None:
    text = json.dumps(value, separators=(",", ":")).encode()
    assert not may_be_unstorable(text)
    assert json_problems(text, top_level_keys=False) == []


@pytest.mark.parametrize(
    "value",
    [
        nested(MAX_DEPTH + 1),
        [WIDE, nested(MAX_DEPTH + 1)],
        # Brackets in strings, placed to cancel the real ones out, do not hide the depth.
        nested_around(MAX_DEPTH + 1, before="]", after="["),
        nested_around(MAX_DEPTH + 1, before='\\"]', after='\\"['),
        {"n": 0},  # made -10**4300 below: json.dumps cannot write it
        {"s": "a\x00"},
        {"s": "\ud800"},
    ],
    ids=[
        "one level too deep",
        "deep beside wide",
        "brackets in strings around",
        "escapes around",
        "huge integer",
        "NUL",
        "lone surrogate",
    ],
)
def test_what_is_not_storable_is_caught_by_both_tests(value: object) -> None:
    text = json.dumps(value, separators=(",", ":")).encode()
    text = text.replace(b'{"n":0}', b'{"n":-1' + b"0" * 4300 + b"}")
    assert may_be_unstorable(text)
    assert json_problems(text, top_level_keys=False) != []
