from __future__ import annotations

import asyncio
import json
import math
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pydantic
import pytest

from starlette_jobs import (
    Job,
    JobArgumentsError,
    JobDefinitionError,
    JobId,
    NotStartedError,
    Retry,
    job,
)
from starlette_jobs._job import registered_job


class Address(pydantic.BaseModel):
    city: str
    zip_code: str


@job(queue="typed", retry=Retry.fixed(max_attempts=2, delay=0.1), priority=5, timeout=3)
async def typed_job(
    user_id: int, when: datetime, ref: uuid.UUID, address: Address, note: str = "none"
) -> str:
    return f"{user_id} {note}"


def test_the_decorated_function_is_still_callable_inline() -> None:
    @job
    def add(a: int, b: int) -> int:
        return a + b

    assert add(2, 3) == 5
    assert isinstance(add, Job)


def test_declaration_defaults_and_name() -> None:
    assert typed_job.name == "tests.test_job.typed_job"
    assert (typed_job.queue, typed_job.priority, typed_job.timeout) == ("typed", 5, 3)
    assert typed_job.retry == Retry.fixed(max_attempts=2, delay=0.1)
    assert registered_job("tests.test_job.typed_job") is typed_job


def test_arguments_round_trip_into_the_functions_own_types() -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    ref = uuid.uuid4()
    payload = typed_job._serialize_arguments(
        (7,), {"when": when, "ref": ref, "address": {"city": "Paris", "zip_code": "75001"}}
    )
    kwargs = typed_job._parse_arguments(payload)
    # `note` was not given: the function's own default applies when it is called.
    assert kwargs == {
        "user_id": 7,
        "when": when,
        "ref": ref,
        "address": Address(city="Paris", zip_code="75001"),
    }
    assert asyncio.run(typed_job._run(kwargs)) == "7 none"
    assert type(kwargs["ref"]) is uuid.UUID


def test_only_the_given_arguments_are_stored_so_defaults_apply_at_run_time() -> None:
    @job
    async def greet(name: str, greeting: str = "hello") -> None: ...

    assert greet._serialize_arguments((), {"name": "ada"}) == '{"name":"ada"}'
    assert greet._parse_arguments('{"name":"ada"}') == {"name": "ada"}


GOOD: dict[str, Any] = {
    "user_id": 1,
    "when": datetime(2026, 1, 1, tzinfo=UTC),
    "ref": str(uuid.UUID(int=1)),
    "address": {"city": "x", "zip_code": "y"},
}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"user_id": "not a number"}, "user_id"),
        ({"user_id": None}, "user_id"),
        ({"ref": "not-a-uuid"}, "ref"),
        ({"address": {"city": "x"}}, "address.zip_code"),
        ({"unexpected": 1}, "unexpected"),
        ({"user_id": math.nan}, "user_id"),
    ],
)
def test_bad_arguments_are_refused_with_pydantic_details(
    change: dict[str, Any], expected: str
) -> None:
    with pytest.raises(JobArgumentsError) as caught:
        typed_job._serialize_arguments((), {**GOOD, **change})
    error = caught.value
    assert isinstance(error, ValueError)
    assert error.job_name == typed_job.name
    assert expected in str(error)
    assert any(".".join(map(str, e["loc"])) == expected for e in error.errors)


def test_missing_arguments_are_refused() -> None:
    arguments = {k: v for k, v in GOOD.items() if k != "when"}
    with pytest.raises(JobArgumentsError, match="when"):
        typed_job._serialize_arguments((), arguments)


def test_too_many_positional_arguments_are_refused() -> None:
    with pytest.raises(JobArgumentsError, match="too many positional"):
        typed_job._serialize_arguments((1, 2, 3, 4, 5, 6), {})


class FiniteOnly(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(allow_inf_nan=False)
    x: float


@job
async def takes_finite_only(m: FiniteOnly) -> None: ...


def test_nan_inside_a_model_argument_is_refused_when_the_model_refuses_it() -> None:
    # The guidance in docs/reliability.md (Known limits) for models that allow NaN by default.
    with pytest.raises(JobArgumentsError, match="finite number"):
        takes_finite_only._serialize_arguments((), {"m": {"x": math.nan}})
    assert takes_finite_only._serialize_arguments((), {"m": {"x": 1.5}}) == '{"m":{"x":1.5}}'


def test_values_json_cannot_hold_are_refused_even_untyped() -> None:
    @job
    async def untyped(data: Any) -> None: ...

    for value in (math.nan, math.inf, {"deep": [1, -math.inf]}):
        with pytest.raises(JobArgumentsError, match="JSON"):
            untyped._serialize_arguments((), {"data": value})
    with pytest.raises(JobArgumentsError):
        untyped._serialize_arguments((), {"data": object()})


def test_a_parameter_named_like_a_pydantic_attribute_works() -> None:
    @job
    async def clash(json: str, copy: int, model_config: bool) -> None: ...

    payload = clash._serialize_arguments((), {"json": "j", "copy": 2, "model_config": True})
    assert clash._parse_arguments(payload) == {"json": "j", "copy": 2, "model_config": True}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"queue": ""}, "queue name"),
        ({"queue": "x" * 49}, "queue name"),
        ({"queue": "bad queue!"}, "queue name"),
        ({"name": ""}, "job name"),
        ({"name": "drop table;"}, "job name"),
        ({"priority": 2**31}, "priority"),
        ({"timeout": 0}, "timeout"),
        ({"priority": True}, "32-bit integer"),
        ({"timeout": 1e13}, "at most 315360000"),
        ({"timeout": True}, "timeout"),
    ],
)
def test_invalid_declarations_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(JobDefinitionError, match=message):

        @job(**options)
        async def declared() -> None: ...


def test_variadic_parameters_are_refused_at_declaration() -> None:
    with pytest.raises(JobDefinitionError, match="named parameters"):

        @job
        async def variadic(*items: int) -> None: ...


def test_two_functions_cannot_share_a_job_name() -> None:
    @job(name="tests.shared-name")
    async def first() -> None: ...

    with pytest.raises(JobDefinitionError, match="two different functions"):

        @job(name="tests.shared-name")
        async def second() -> None: ...


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"delay": -1}, "delay"),
        ({"delay": math.inf}, "delay"),
        ({"run_at": datetime(2026, 1, 1)}, "timezone"),
        ({"delay": 1, "run_at": datetime.now(UTC) + timedelta(seconds=1)}, "not both"),
        ({"queue": "no spaces"}, "queue"),
        ({"priority": -(2**31) - 1}, "priority"),
        ({"priority": False}, "32-bit integer"),
        ({"delay": 1e13}, "at most 315360000"),
        ({"delay": True}, "delay"),
        ({"run_at": datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14)))}, "years 1 and 9999"),
        ({"run_at": datetime.min.replace(tzinfo=UTC)}, "years 1 and 9999"),
        ({"unique_key": "k" * 513}, "1 to 512 characters"),
        ({"unique_key": 42}, "1 to 512 characters"),
        ({"unique_key": "a\x00"}, "NUL"),
        ({"unique_key": "\udfff"}, "lone surrogate"),
    ],
)
def test_invalid_enqueue_options_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(JobDefinitionError, match=message):
        typed_job.configure(**options)


async def test_enqueue_without_a_started_jobs_says_how_to_start_one() -> None:
    with pytest.raises(NotStartedError, match="lifespan"):
        await typed_job.enqueue(**GOOD)


async def test_validation_happens_before_any_database_is_needed() -> None:
    with pytest.raises(JobArgumentsError):
        await typed_job.enqueue(user_id="x")  # type: ignore[arg-type, call-arg]


class Order(pydantic.BaseModel):
    idempotency_key: uuid.UUID = pydantic.Field(default_factory=uuid.uuid4)
    amount: int


def test_a_default_factory_value_inside_an_argument_is_made_once_at_enqueue() -> None:
    @job
    async def charge(order: Order, note: str = "none") -> None: ...

    payload = charge._serialize_arguments((), {"order": {"amount": 5}})
    first, second = charge._parse_arguments(payload), charge._parse_arguments(payload)
    assert first["order"].idempotency_key == second["order"].idempotency_key
    assert "note" not in payload


def test_a_retry_policy_with_an_infinite_delay_is_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        Retry.fixed(delay=math.inf)


def _batch(target: Job[..., Any], items: list[dict[str, Any]]) -> list[str] | None:
    return target._arguments.serialize_batch(items)


def test_a_batch_is_stored_as_each_item_would_be_alone() -> None:
    @job
    async def charge_many(order: Order, note: str = "none", data: Any = None) -> None: ...

    items: list[dict[str, Any]] = [
        {"order": {"amount": n}, "data": {"text": "héllo", "n": [n, 1.5]}} for n in range(3)
    ]
    items += [{"order": {"amount": 3}, "note": "gift"}, {"order": {"amount": 4}}]
    texts = _batch(charge_many, items)
    assert texts is not None
    for text, item in zip(texts, items, strict=True):
        alone = charge_many._serialize_arguments((), item)
        stored, expected = json.loads(text), json.loads(alone)
        # The default_factory value is made anew for each; everything else is the same.
        del stored["order"]["idempotency_key"], expected["order"]["idempotency_key"]
        assert stored == expected
        assert stored.keys() == item.keys()  # only what was given: defaults apply at run time
        assert "idempotency_key" in text


@pytest.mark.parametrize(
    "items",
    [
        [{**GOOD, "user_id": 1}, {**GOOD, "user_id": "bad"}],  # invalid
        [GOOD, {k: v for k, v in GOOD.items() if k != "ref"}],  # a required argument missing
        [GOOD, {**GOOD, "unexpected": 1}],
    ],
)
def test_a_batch_with_an_invalid_item_takes_the_item_by_item_path(
    items: list[dict[str, Any]],
) -> None:
    assert _batch(typed_job, items) is None


def test_a_batch_holding_nan_or_infinity_anywhere_takes_the_item_by_item_path() -> None:
    @job
    async def untyped_many(data: Any) -> None: ...

    assert _batch(untyped_many, [{"data": 1}, {"data": {"deep": [math.inf]}}]) is None
    assert _batch(untyped_many, [{"data": math.nan}]) is None
    assert _batch(untyped_many, [{"data": [1, "two"]}]) == ['{"data":[1,"two"]}']


def test_job_id_as_an_annotation_refuses_what_no_job_can_have() -> None:
    """FastAPI's path parameter `job_id: JobId` answers 422 for these (docs/fastapi.md)."""
    adapter = pydantic.TypeAdapter(JobId)
    assert adapter.validate_python("42") == 42
    assert adapter.validate_python(2**63 - 1) == 2**63 - 1
    for not_an_id in ["abc", "0", -1, 2**63, "9" * 30, None]:
        with pytest.raises(pydantic.ValidationError):
            adapter.validate_python(not_an_id)
    schema = adapter.json_schema()
    assert (schema["type"], schema["minimum"], schema["maximum"]) == ("integer", 1, 2**63 - 1)
