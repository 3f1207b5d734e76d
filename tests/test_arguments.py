"""A job function's parameters as a schema (`_arguments.ArgumentsSchema`), on its own: what
is stored for what is given, what is refused and where, and how stored JSON comes back. The
same through `@job` and `enqueue` is in test_job.py."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import date
from typing import Annotated, Any

import pydantic
import pytest

from starlette_jobs import JobArgumentsError, JobDefinitionError
from starlette_jobs._arguments import ArgumentsSchema


def schema(func: Any) -> ArgumentsSchema:
    return ArgumentsSchema(func, "tests.job")


def greet(name: str, times: int = 1, *, when: date | None = None) -> None: ...


def test_arguments_given_by_position_are_stored_by_name() -> None:
    assert json.loads(schema(greet).serialize(("ada", 2), {})) == {"name": "ada", "times": 2}


def test_values_are_stored_as_json_of_their_declared_types() -> None:
    stored = schema(greet).serialize((), {"name": "ada", "times": "3", "when": "2026-01-02"})
    assert json.loads(stored) == {"name": "ada", "times": 3, "when": "2026-01-02"}


def test_stored_json_comes_back_in_the_functions_types_without_the_defaults() -> None:
    parsed = schema(greet).parse('{"name": "ada", "when": "2026-01-02"}')
    assert parsed == {"name": "ada", "when": date(2026, 1, 2)}


def test_an_unknown_argument_is_refused_by_its_name() -> None:
    with pytest.raises(JobArgumentsError) as refused:
        schema(greet).serialize((), {"name": "ada", "tiems": 2})
    [error] = refused.value.errors
    assert (error["loc"], error["type"]) == (("tiems",), "extra_forbidden")


def test_a_stored_payload_that_no_longer_fits_the_signature_is_refused_when_parsed() -> None:
    with pytest.raises(JobArgumentsError, match=r"invalid arguments for job 'tests\.job'") as bad:
        schema(greet).parse('{"name": "ada", "removed_parameter": 1}')
    assert [error["loc"] for error in bad.value.errors] == [("removed_parameter",)]
    with pytest.raises(JobArgumentsError):
        schema(greet).parse("not json")


def test_too_many_positional_arguments_are_an_arguments_error() -> None:
    with pytest.raises(JobArgumentsError, match="too many positional arguments"):
        schema(greet).serialize(("ada", 1, 2), {})


def positional_only(a: int, /) -> None: ...


def variadic(*names: str) -> None: ...


def keywords(**options: str) -> None: ...


@pytest.mark.parametrize(
    ("func", "kind"),
    [
        (positional_only, "positional-only"),
        (variadic, "variadic positional"),
        (keywords, "variadic keyword"),
    ],
)
def test_parameters_that_are_not_plainly_named_are_refused(func: Any, kind: str) -> None:
    with pytest.raises(JobDefinitionError, match=f"is {kind}; jobs take named parameters only"):
        schema(func)


def test_annotations_that_cannot_be_resolved_are_refused_naming_the_job() -> None:
    def uses_an_unknown_type(value: NoSuchType) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(JobDefinitionError, match="cannot resolve the type annotations of job"):
        schema(uses_an_unknown_type)


def untyped(value: Any, items: list[Any], mapping: Mapping[str, Any], bare: object = None) -> None:
    """`object` is taken as `Any`, as pydantic does."""


@pytest.mark.parametrize(
    "arguments",
    [
        {"value": b"bytes", "items": [], "mapping": {}},
        {"value": 1, "items": [{1, 2}], "mapping": {}},
        {"value": 1, "items": [], "mapping": {"k": object()}},
        {"value": 1, "items": [], "mapping": {}, "bare": b"x"},
    ],
)
def test_an_untyped_value_must_be_plain_json_wherever_it_is(arguments: dict[str, Any]) -> None:
    """Nothing would turn bytes or a set back into what they were: they are refused."""
    with pytest.raises(JobArgumentsError):
        schema(untyped).serialize((), arguments)


def test_plain_json_is_taken_untyped_and_comes_back_as_it_went() -> None:
    arguments = {"value": {"a": [1, 2.5, None, True]}, "items": ["x", {"y": 1}], "mapping": {}}
    stored = schema(untyped).serialize((), arguments)
    assert schema(untyped).parse(stored) == arguments


def annotated(
    value: Annotated[Any, "a note"], choice: int | Any, ids: Sequence[Any] = ()
) -> None: ...


def test_any_inside_annotated_unions_and_sequences_is_plain_json_too() -> None:
    checked = schema(annotated)
    for refused in ({"value": b"x", "choice": 1}, {"value": 1, "choice": b"x"}):
        with pytest.raises(JobArgumentsError):
            checked.serialize((), refused)
    with pytest.raises(JobArgumentsError):
        checked.serialize((), {"value": 1, "choice": 1, "ids": [b"x"]})
    assert json.loads(checked.serialize((), {"value": [1], "choice": "two", "ids": [3]})) == {
        "value": [1],
        "choice": "two",
        "ids": [3],
    }


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
        ("nul \x00 inside", "NUL"),
        ("lone \udc80 surrogate", "surrogate"),
    ],
)
def test_what_postgresql_or_json_cannot_hold_is_refused_where_it_is(
    value: Any, reason: str
) -> None:
    with pytest.raises(JobArgumentsError) as refused:
        schema(untyped).serialize((), {"value": 1, "items": [0, value], "mapping": {}})
    [error] = refused.value.errors
    assert error["loc"][:2] == ("items", 1)
    assert reason.lower() in error["msg"].lower()


class Reading(pydantic.BaseModel):
    """A model keeps settings of its own: it takes NaN and writes it as null."""

    value: float
    note: str | None = None


@pydantic.dataclasses.dataclass
class Sample:
    value: float


def measured(
    reading: Reading, history: list[Reading] | None = None, sample: Sample | None = None
) -> None: ...


@pytest.mark.parametrize(
    ("arguments", "loc"),
    [
        ({"reading": {"value": float("nan")}}, ("reading", "value")),
        ({"reading": Reading(value=float("inf"))}, ("reading", "value")),
        (
            {"reading": {"value": 1}, "history": [{"value": 2}, {"value": -math.inf}]},
            ("history", 1, "value"),
        ),
        ({"reading": {"value": 1}, "sample": {"value": float("nan")}}, ("sample", "value")),
    ],
)
def test_nan_inside_a_model_is_refused_where_it_is_not_stored_as_null(
    arguments: dict[str, Any], loc: tuple[Any, ...]
) -> None:
    """Stored as null, it failed the job when it ran: a float field takes no null."""
    checked = schema(measured)
    with pytest.raises(JobArgumentsError) as refused:
        checked.serialize((), arguments)
    [error] = refused.value.errors
    assert (error["loc"], error["msg"]) == (loc, "NaN and infinity are not storable as JSON")
    assert checked.serialize_batch([arguments]) is None  # item by item, then: refused the same


def test_a_models_own_nulls_are_stored() -> None:
    checked = schema(measured)
    arguments = {"reading": {"value": 1.5, "note": None}, "history": None}
    stored = checked.serialize((), arguments)
    assert json.loads(stored) == {"reading": {"value": 1.5, "note": None}, "history": None}


def test_a_lone_surrogate_in_a_dict_key_is_refused_and_located() -> None:
    def keyed(mapping: dict[str, int]) -> None: ...

    with pytest.raises(JobArgumentsError, match="surrogate") as refused:
        schema(keyed).serialize((), {"mapping": {"ok": 1, "bad \udc80": 2}})
    assert refused.value.errors[0]["loc"][0] == "mapping"


class Point(pydantic.BaseModel):
    x: int
    y: int = 0


def located(point: Point) -> None: ...


def test_a_batch_is_stored_as_each_item_alone_would_be() -> None:
    checked = schema(located)
    items: list[dict[str, Any]] = [{"point": {"x": 1}}, {"point": Point(x=2, y=3)}]
    assert checked.serialize_batch(items) == [checked.serialize((), item) for item in items]


@pytest.mark.parametrize(
    "bad", [{"point": {"x": "one"}}, {"point": {"x": 1}, "extra": 1}, {"point": {"x": 10**5000}}]
)
def test_a_batch_with_anything_wrong_says_none_for_the_item_by_item_path(
    bad: dict[str, Any],
) -> None:
    assert schema(located).serialize_batch([{"point": {"x": 1}}, bad]) is None


def test_parameter_names_pydantic_gives_a_meaning_to_are_plain_names() -> None:
    def odd(model_config: str, schema: int, validate: bool) -> None: ...

    checked = ArgumentsSchema(odd, "tests.odd")
    stored = checked.serialize((), {"model_config": "x", "schema": 1, "validate": True})
    assert json.loads(stored) == {"model_config": "x", "schema": 1, "validate": True}
    assert checked.parse(stored) == {"model_config": "x", "schema": 1, "validate": True}


# -- values whose JSON would not come back as they were ------------------------------------------


class _Account(pydantic.BaseModel):
    login: str
    password: pydantic.SecretStr


def sign_in(account: _Account, token: pydantic.SecretBytes | None = None) -> None: ...


def test_a_secret_is_refused_at_enqueue_rather_than_stored_masked() -> None:
    """pydantic writes a secret as '**********': the job ran with that in place of the
    password, and the stored arguments held only the mask."""
    account = {"login": "ada", "password": "hunter2"}
    with pytest.raises(JobArgumentsError, match="SecretStr: pydantic writes a secret") as bad:
        schema(sign_in).serialize((), {"account": account})
    assert [error["loc"] for error in bad.value.errors] == [("account", "password")]
    with pytest.raises(JobArgumentsError, match="SecretBytes"):
        schema(sign_in).serialize((), {"account": {**account, "password": "x"}, "token": b"k"})
    assert schema(sign_in).serialize_batch([{"account": account}]) is None  # said item by item


def test_a_plain_string_that_reads_like_a_mask_is_stored() -> None:
    stored = schema(greet).serialize((), {"name": "**********"})
    assert json.loads(stored) == {"name": "**********"}


def _json_text(rows: pydantic.Json[list[int]]) -> None: ...


def _tuple_keys(cells: dict[tuple[int, int], str]) -> None: ...


class _Grid(pydantic.BaseModel):
    cells: dict[frozenset[int], str]
    inner: list[_Grid] = []


def _nested_tuple_keys(grid: _Grid) -> None: ...


@pytest.mark.parametrize(
    ("func", "says"),
    [
        (_json_text, r"parameter 'rows': a Json\[...\] value is stored as the value it parses to"),
        (_tuple_keys, "parameter 'cells': a dict whose keys are tuples"),
        (_nested_tuple_keys, "a dict whose keys are tuples"),
    ],
)
def test_a_type_whose_stored_json_would_not_validate_again_is_refused_at_declaration(
    func: Any, says: str
) -> None:
    """Its values validated at enqueue (`Json` takes the text, tuple keys are written '1,2'),
    and then every attempt failed in the worker ("Input should be a valid array")."""
    with pytest.raises(JobDefinitionError, match=says):
        schema(func)


def export(owner: str, month: str, signing_key: str, config: Mapping[str, str]) -> None: ...


class Signing(pydantic.BaseModel):
    key: str
    algorithm: str


def sign(signing: Signing) -> None: ...


def test_a_missing_argument_shows_no_input_for_the_others_may_be_the_servers() -> None:
    """pydantic gives a missing field the whole mapping it is missing from as its input: the
    arguments a server added (`enqueue(**body, signing_key=...)`) went back to the client."""
    with pytest.raises(JobArgumentsError) as refused:
        schema(export).serialize((), {"owner": "alice", "signing_key": "sk_live_secret"})
    assert [(error["loc"], error["input"]) for error in refused.value.errors] == [
        (("month",), None),
        (("config",), None),
    ]
    with pytest.raises(JobArgumentsError) as nested:
        schema(sign).serialize((), {"signing": {"key": "sk_live_secret"}})
    [error] = nested.value.errors
    assert (error["loc"], error["type"], error["input"]) == (
        ("signing", "algorithm"),
        "missing",
        None,
    )
    assert "sk_live_secret" not in repr(refused.value.errors) + repr(nested.value.errors)
