"""The cheap test that keeps enqueue fast, against the exact one it stands in for."""

from __future__ import annotations

import json

import pydantic
import pytest

from starlette_jobs._storable import MAX_DEPTH, json_problems, may_be_unstorable, storable_json


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


class Opaque:
    """A type that JSON does not know."""


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (Opaque(), "(the value)"),
        ({"a": [1, Opaque()]}, "a.1"),
        ([{"ok": 1}, {"b": (2, {"c": Opaque()})}], "1.b.1.c"),
    ],
    ids=["the-value", "in-a-list", "deep"],
)
def test_a_value_of_a_type_json_does_not_know_is_refused_naming_where(
    value: object, where: str
) -> None:
    """As the other refusals do: a result or progress too big to search by eye says where."""
    with pytest.raises(ValueError, match="Unable to serialize unknown type") as refused:
        storable_json(value, 1 << 20)
    assert str(refused.value).startswith(f"{where}: not JSON: ")


def test_a_value_that_holds_itself_is_refused_naming_where_it_does() -> None:
    looped: list[object] = [1]
    looped.append({"again": looped})
    with pytest.raises(ValueError, match=r"^1\.again: not JSON: .*[Cc]ircular"):
        storable_json(looped, 1 << 20)


def test_a_secret_in_a_result_is_refused_rather_than_stored_masked() -> None:
    class Credentials(pydantic.BaseModel):
        password: pydantic.SecretStr

    with pytest.raises(ValueError, match=r"0\.password: a SecretStr: pydantic writes a secret"):
        storable_json([Credentials(password=pydantic.SecretStr("hunter2"))], 1_000)
    assert storable_json({"shown": "**********"}, 1_000) == b'{"shown":"**********"}'
