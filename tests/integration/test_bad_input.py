"""Bad input is refused at enqueue with a clear error and writes nothing; text that looks like
SQL is stored as it is; a row with a malformed trace context still runs."""

from __future__ import annotations

import decimal
import math
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import asyncpg
import pydantic
import pytest

from starlette_jobs import (
    JobArgumentsError,
    JobDefinitionError,
    JobNotFoundError,
    Jobs,
    JobStatus,
    Retry,
    Workflow,
    WorkflowDefinitionError,
    correlation_id,
    job,
)
from starlette_jobs._correlation import correlation_scope
from starlette_jobs._job import _registry
from tests.conftest import StartJobs


@job(retry=Retry.none())
async def typed(n: int, label: str = "") -> None:
    pass


@job(retry=Retry.none())
async def untyped(value: Any) -> None:
    pass


@job(retry=Retry.none())
async def measured(x: float) -> None:
    pass


@job(retry=Retry.none())
async def unannotated(value) -> None:  # type: ignore[no-untyped-def]
    pass


@job(retry=Retry.none())
async def anything_at_all(value: object) -> None:
    pass


@job(retry=Retry.none())
async def binary(data: bytes) -> None:
    pass


class Item(pydantic.BaseModel):
    name: str
    tags: list[str] = []


@job(retry=Retry.none())
async def modelled(item: Item) -> None:
    pass


@job(retry=Retry.none())
async def mapped(data: dict[str, Any], items: list[Any] | None = None) -> None:
    pass


def nested(depth: int) -> Any:
    """A value `depth` lists deep: `nested(2) == [[0]]`."""
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


ONE_MIB = 1024 * 1024
# 4,300 digits is Python's limit for converting an int from text, which reading it back needs.
HUGE = 10**4300
UTC_MINUS_14 = timezone(-timedelta(hours=14))

# (case, the call, the error it raises or None when it is accepted, a phrase of the message)
REFUSED: list[tuple[str, Callable[[], Awaitable[Any]], type[Exception] | None, str]] = [
    ("wrong type", lambda: typed.enqueue(n="seven"), JobArgumentsError, "valid integer"),  # type: ignore[arg-type]
    ("missing argument", lambda: typed.enqueue(), JobArgumentsError, "n: Field required"),  # type: ignore[call-arg]
    ("extra argument", lambda: typed.enqueue(n=1, colour="red"), JobArgumentsError, "colour: Extra inputs are not permitted"),  # type: ignore[call-arg]
    ("NaN, typed", lambda: measured.enqueue(x=math.nan), JobArgumentsError, "finite number"),
    ("infinity, typed", lambda: measured.enqueue(x=-math.inf), JobArgumentsError, "finite number"),
    ("NaN, untyped", lambda: untyped.enqueue(value={"a": [math.nan]}), JobArgumentsError, "JSON"),
    ("infinity, untyped", lambda: untyped.enqueue(value=math.inf), JobArgumentsError, "JSON"),
    ("not JSON at all", lambda: untyped.enqueue(value=object()), JobArgumentsError, "JSON"),
    ("bytes", lambda: untyped.enqueue(value=b"\xff\xfe"), JobArgumentsError, "JSON"),
    ("payload over 1 MiB", lambda: typed.enqueue(n=1, label="x" * ONE_MIB), JobArgumentsError, "over the limit of 1048576"),
    ("multi-byte payload over 1 MiB", lambda: typed.enqueue(n=1, label="é" * (ONE_MIB // 2)), JobArgumentsError, "over the limit"),
    ("one big item in a batch", lambda: typed.enqueue_many([{"n": 1}, {"n": 2, "label": "x" * ONE_MIB}]), JobArgumentsError, "1: the arguments take"),
    ("one bad item in a batch", lambda: typed.enqueue_many([{"n": 1}, {"n": "two"}]), JobArgumentsError, "1.n: Input should be a valid integer"),
    ("empty queue name", lambda: typed.configure(queue="").enqueue(n=1), JobDefinitionError, "invalid queue name ''"),
    ("queue name too long", lambda: typed.configure(queue="q" * 49).enqueue(n=1), JobDefinitionError, "1 to 48"),
    ("queue name with a space", lambda: typed.configure(queue="my queue").enqueue(n=1), JobDefinitionError, "invalid queue name"),
    ("queue name with a quote", lambda: typed.configure(queue="q';--").enqueue(n=1), JobDefinitionError, "invalid queue name"),
    ("queue name not ASCII", lambda: typed.configure(queue="fila-é").enqueue(n=1), JobDefinitionError, "invalid queue name"),
    ("negative delay", lambda: typed.configure(delay=-1).enqueue(n=1), JobDefinitionError, "delay must be a finite number of seconds >= 0"),
    ("NaN delay", lambda: typed.configure(delay=math.nan).enqueue(n=1), JobDefinitionError, "delay must be"),
    ("infinite delay", lambda: typed.configure(delay=math.inf).enqueue(n=1), JobDefinitionError, "delay must be"),
    ("run_at without a time zone", lambda: typed.configure(run_at=datetime(2030, 1, 1)).enqueue(n=1), JobDefinitionError, "timezone-aware"),
    ("delay and run_at both", lambda: typed.configure(delay=1, run_at=datetime.now().astimezone()).enqueue(n=1), JobDefinitionError, "either delay or run_at"),
    ("priority beyond 32 bits", lambda: typed.configure(priority=2**31).enqueue(n=1), JobDefinitionError, "32-bit integer"),
    ("unique key shared by a batch", lambda: typed.configure(unique_key="k").enqueue_many([{"n": 1}]), JobDefinitionError, "unique_key names one job"),
    # Text PostgreSQL cannot store: NUL and lone surrogates, wherever they are.
    ("NUL, typed", lambda: typed.enqueue(n=1, label="a\x00b"), JobArgumentsError, "label: holds a NUL character"),
    ("lone surrogate, typed", lambda: typed.enqueue(n=1, label="\ud800"), JobArgumentsError, "label: holds a lone surrogate"),
    ("NUL, untyped", lambda: untyped.enqueue(value="\x00"), JobArgumentsError, "value: holds a NUL character"),
    ("NUL nested in untyped", lambda: untyped.enqueue(value={"a": [1, "x\x00"]}), JobArgumentsError, "value.a.1: holds a NUL"),
    ("lone surrogate nested in untyped", lambda: untyped.enqueue(value=[{"a": "\udfff"}]), JobArgumentsError, "value.0.a: holds a lone surrogate"),
    ("NUL in a dict key", lambda: untyped.enqueue(value={"k\x00": 1}), JobArgumentsError, "holds a NUL character"),
    ("lone surrogate in a dict key", lambda: untyped.enqueue(value={"\ud800": 1}), JobArgumentsError, "holds a lone surrogate"),
    ("lone surrogate in a typed dict key", lambda: mapped.enqueue(data={"\udc00": 1}), JobArgumentsError, "holds a lone surrogate"),
    ("NUL nested in a model", lambda: modelled.enqueue(item=Item(name="ok", tags=["\x00"])), JobArgumentsError, "item.tags.0: holds a NUL"),
    ("lone surrogate in a model", lambda: modelled.enqueue(item=Item(name="\ud800")), JobArgumentsError, "item.name: holds a lone surrogate"),
    ("NUL in bytes", lambda: binary.enqueue(data=b"a\x00"), JobArgumentsError, "data: holds a NUL"),
    ("text that merely looks like an escaped NUL is stored", lambda: typed.enqueue(n=1, label="\\u0000 \\ud800"), None, ""),
    ("NUL in a batch", lambda: typed.enqueue_many([{"n": 1}, {"n": 2, "label": "\x00"}]), JobArgumentsError, "1.label: holds a NUL"),
    ("lone surrogate in a batch", lambda: untyped.enqueue_many([{"value": 1}, {"value": {"\ud800": 1}}]), JobArgumentsError, "holds a lone surrogate"),
    ("NUL in a unique key", lambda: typed.configure(unique_key="k\x00").enqueue(n=1), JobDefinitionError, "unique_key holds a NUL"),
    ("lone surrogate in a unique key", lambda: typed.configure(unique_key="\ud800").enqueue(n=1), JobDefinitionError, "unique_key holds a lone surrogate"),
    # A unique key is indexed: PostgreSQL refuses index rows over 2704 bytes.
    ("unique key of 10 kB", lambda: typed.configure(unique_key="k" * 10_000).enqueue(n=1), JobDefinitionError, "unique_key must be 1 to 512 characters"),
    ("empty unique key", lambda: typed.configure(unique_key="").enqueue(n=1), JobDefinitionError, "unique_key must be 1 to 512 characters"),
    # Times and numbers the database cannot hold.
    ("delay past the range of a timestamp", lambda: typed.configure(delay=1e13).enqueue(n=1), JobDefinitionError, "at most 315360000"),
    ("run_at past year 9999 in UTC", lambda: typed.configure(run_at=datetime(9999, 12, 31, 20, tzinfo=UTC_MINUS_14)).enqueue(n=1), JobDefinitionError, "run_at"),
    ("run_at at datetime.max (stored as infinity)", lambda: typed.configure(run_at=datetime.max.replace(tzinfo=UTC)).enqueue(n=1), JobDefinitionError, "run_at"),
    ("priority given as a bool", lambda: typed.configure(priority=True).enqueue(n=1), JobDefinitionError, "32-bit integer"),
    # What the worker could not read back: deep nesting and huge integers.
    ("nesting deeper than 64", lambda: untyped.enqueue(value=nested(65)), JobArgumentsError, "value: nested deeper than 64 levels"),
    ("nesting the worker cannot parse", lambda: untyped.enqueue(value=nested(220)), JobArgumentsError, "nested deeper than 64 levels"),
    ("nesting deeper than 64 in a batch", lambda: untyped.enqueue_many([{"value": 1}, {"value": {"a": nested(70)}}]), JobArgumentsError, "1.value: nested deeper"),
    ("integer over 4300 digits, typed", lambda: typed.enqueue(n=HUGE), JobArgumentsError, "n: an integer of more than 4300 digits"),
    ("integer over 4300 digits, untyped", lambda: untyped.enqueue(value={"n": [-HUGE]}), JobArgumentsError, "value.n.0: an integer of more than 4300 digits"),
    ("integer over 4300 digits in a batch", lambda: typed.enqueue_many([{"n": 1}, {"n": HUGE}]), JobArgumentsError, "1.n: an integer of more than"),
    # Untyped values must be plain JSON values: anything else would come back as another type.
    ("bytes that are UTF-8, untyped", lambda: untyped.enqueue(value=b"abc"), JobArgumentsError, "value: input was not a valid JSON value"),
    ("bytes, unannotated", lambda: unannotated.enqueue(value=b"abc"), JobArgumentsError, "not a valid JSON value"),
    ("set, untyped", lambda: untyped.enqueue(value={1, 2}), JobArgumentsError, "not a valid JSON value"),
    ("set, annotated object", lambda: anything_at_all.enqueue(value={1, 2}), JobArgumentsError, "not a valid JSON value"),
    ("tuple, untyped", lambda: untyped.enqueue(value=(1, 2)), JobArgumentsError, "not a valid JSON value"),
    ("datetime, untyped", lambda: untyped.enqueue(value=datetime.now(UTC)), JobArgumentsError, "not a valid JSON value"),
    ("Decimal, untyped", lambda: untyped.enqueue(value=decimal.Decimal("1.5")), JobArgumentsError, "not a valid JSON value"),
    ("UUID nested in untyped", lambda: untyped.enqueue(value={"id": uuid.uuid4()}), JobArgumentsError, "value.dict.id: input was not a valid JSON value"),
    ("dict with an int key, untyped", lambda: untyped.enqueue(value={1: "a"}), JobArgumentsError, "valid string"),
    ("bytes in a dict[str, Any]", lambda: mapped.enqueue(data={"a": b"x"}), JobArgumentsError, "data.a: input was not a valid JSON value"),
    ("set in a list[Any] | None", lambda: mapped.enqueue(data={}, items=[{1}]), JobArgumentsError, "items.0: input was not a valid JSON value"),
    ("bytes in an untyped batch", lambda: untyped.enqueue_many([{"value": 1}, {"value": b"x"}]), JobArgumentsError, "1.value: input was not"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("call", "error", "phrase"),
    [pytest.param(call, error, phrase, id=case) for case, call, error, phrase in REFUSED],
)
async def test_bad_input_is_refused_clearly_and_writes_nothing(
    start_jobs: StartJobs,
    connection: asyncpg.Connection[Any],
    call: Callable[[], Awaitable[Any]],
    error: type[Exception] | None,
    phrase: str,
) -> None:
    async with start_jobs(queues={}):
        if error is None:  # a row that pins what is accepted
            await call()
            assert await connection.fetchval("SELECT count(*) FROM starlette_jobs") == 1
            return
        with pytest.raises(error) as raised:
            await call()
    assert phrase in str(raised.value)
    assert await connection.fetchval("SELECT count(*) FROM starlette_jobs") == 0


@pytest.mark.parametrize(
    ("name", "phrase"),
    [("", "invalid job name ''"), ("j" * 201, "1 to 200"), ("send mail", "invalid job name"),
     ("x'); DROP TABLE t;--", "invalid job name"), ("名前", "invalid job name"),
     ("a/b", "invalid job name"), ("a\x00", "invalid job name"), ("a\n", "invalid job name"),
     ("\ud800", "invalid job name")],
)  # fmt: skip
def test_bad_job_names_are_refused_where_the_job_is_declared(name: str, phrase: str) -> None:
    with pytest.raises(JobDefinitionError, match=phrase):

        @job(name=name)
        async def anything() -> None:
            pass


@pytest.mark.parametrize(
    "name", ["j" * 200, "x", "tests.bad_input", "bad_input:v2", "app.<locals>.send", "a-b_c.D9"]
)
def test_job_names_are_1_to_200_letters_digits_or_these_marks(name: str) -> None:
    # Looser than queue names (1 to 48 of letters, digits, _ . -): the default name is
    # module.qualname, which holds `<locals>` for a function declared in another.
    @job(name=name)
    async def anything() -> None:
        pass

    assert anything.name == name
    del _registry[name]  # these names may be wanted by other tests


def test_a_default_job_name_is_module_and_qualname_even_inside_a_function() -> None:
    @job
    async def inner() -> None:
        pass

    assert inner.name == (
        "tests.integration.test_bad_input."
        "test_a_default_job_name_is_module_and_qualname_even_inside_a_function.<locals>.inner"
    )


async def test_the_payload_limit_is_a_setting(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    async with start_jobs(queues={}, max_payload_bytes=100) as jobs:
        with pytest.raises(JobArgumentsError, match="over the limit of 100"):
            await jobs.enqueue(typed, n=1, label="x" * 100)
        await jobs.enqueue(typed, n=1, label="x" * 50)
    assert await connection.fetchval("SELECT count(*) FROM starlette_jobs") == 1
    with pytest.raises(JobDefinitionError, match="max_payload_bytes must be at least 1"):
        Jobs(max_payload_bytes=0)


SQL = "'); DROP TABLE starlette_jobs; -- $1 \\x00 %s {0} \"quoted\" E'\\\\'"


@job(retry=Retry.none())
async def echo_and_fail(text: str, fail: bool) -> str:
    if fail:
        raise ValueError(text)
    return text


async def test_sql_looking_text_is_stored_verbatim_in_every_string_field(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    async with start_jobs(queues={"default": 2}) as jobs:
        with correlation_scope(SQL):
            ok = await echo_and_fail.configure(unique_key=SQL).enqueue(text=SQL, fail=False)
            failing = await echo_and_fail.enqueue(text=SQL, fail=True)
        await jobs.drain(timeout=10)
        succeeded, failed = await jobs.get(ok), await jobs.get(failing)
    assert succeeded is not None
    assert failed is not None
    assert succeeded.status is JobStatus.SUCCEEDED
    assert succeeded.arguments["text"] == SQL
    assert succeeded.result == SQL
    assert failed.last_error is not None
    assert failed.last_error.endswith(f"ValueError: {SQL}")
    row = await connection.fetchrow(
        "SELECT unique_key, trace_context->>'x-request-id' AS request_id FROM starlette_jobs "
        "WHERE id = $1",
        ok,
    )
    assert row is not None
    assert (row["unique_key"], row["request_id"]) == (SQL, SQL)
    assert await connection.fetchval("SELECT count(*) FROM starlette_jobs") == 2


seen_correlation_ids: list[str | None] = []


@job(retry=Retry.none())
async def remember_correlation_id() -> None:
    seen_correlation_ids.append(correlation_id())


@pytest.mark.parametrize(
    "stored",
    [
        '{"traceparent": "00-zzzz-not-a-trace", "baggage": 5}',
        '{"traceparent": "00-00000000000000000000000000000000-0000000000000000-01"}',
        '{"traceparent": 17, "tracestate": [1, 2], "x-request-id": {"a": 1}}',
        '["not", "an", "object"]',
        '"a string"',
        "null",
        '{"traceparent": "' + "f" * 10_000 + '"}',
    ],
)
async def test_a_row_with_a_malformed_trace_context_still_runs(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any], stored: str
) -> None:
    seen_correlation_ids.clear()
    async with start_jobs() as jobs:
        job_id = await connection.fetchval(
            "INSERT INTO starlette_jobs (name, queue, payload, max_attempts, trace_context) "
            "VALUES ($1, 'default', '{}', 1, $2::jsonb) RETURNING id",
            remember_correlation_id.name,
            stored,
        )
        await jobs.drain(timeout=10)
        record = await jobs.get(job_id)
    assert record is not None
    assert record.status is JobStatus.SUCCEEDED
    assert seen_correlation_ids == [None]


@job(retry=Retry.none())
async def fail_with_unstorable_text() -> None:
    # What enqueue refuses in arguments, an exception's message can hold.
    raise ValueError("bad \ud800 \x00")


async def test_an_error_text_postgresql_cannot_store_is_kept_with_escapes(
    start_jobs: StartJobs,
) -> None:
    async with start_jobs() as jobs:
        job_id = await fail_with_unstorable_text.enqueue()
        await jobs.drain(timeout=10)
        record = await jobs.get(job_id)
    assert record is not None
    assert record.status is JobStatus.FAILED
    assert record.last_error is not None
    assert record.last_error.endswith("ValueError: bad \\ud800 \\x00")
    assert record.errors[0]["error"].endswith("ValueError: bad \\ud800 \\x00")


@job(retry=Retry.none())
async def give_back(kind: str) -> Any:
    return {
        "surrogate": {"a": ["\ud800"]},
        "nul key": {"a\x00": 1},
        "huge integer": [HUGE],
        "too deep": nested(65),
    }[kind]


@pytest.mark.parametrize("kind", ["surrogate", "nul key", "huge integer", "too deep"])
async def test_a_result_that_could_not_be_stored_or_read_back_is_dropped_with_a_warning(
    start_jobs: StartJobs, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    async with start_jobs() as jobs:
        job_id = await give_back.enqueue(kind=kind)
        await jobs.drain(timeout=10)
        record = await jobs.get(job_id)
        assert await jobs.list() == [record]
    assert record is not None
    assert (record.status, record.result) == (JobStatus.SUCCEEDED, None)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert [m for m in warnings if f"job {job_id} " in m and "result not stored" in m], warnings
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


async def test_a_correlation_id_postgresql_cannot_store_is_kept_with_escapes(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    async with start_jobs(queues={}):
        with correlation_scope("req\x00-\udfff"):
            job_id = await typed.enqueue(n=1)
    stored = await connection.fetchval(
        "SELECT trace_context->>'x-request-id' FROM starlette_jobs WHERE id = $1", job_id
    )
    assert stored == "req\\x00-\\udfff"


DEEP = "[" * 5000 + "]" * 5000
HUGE_TEXT = "9" * 5000


@pytest.mark.parametrize(
    ("payload", "errors", "result"),
    [
        (f'{{"n": {HUGE_TEXT}}}', "[]", None),
        ("{}", "[]", f"[{HUGE_TEXT}, 1]"),
        ("{}", f'[{{"attempt": 1, "error": "x", "n": -{HUGE_TEXT}}}]', None),
        (f'{{"n": {DEEP}}}', "[]", None),
        ("{}", DEEP, DEEP),
    ],
    ids=["huge integer in arguments", "huge integer in the result", "huge integer in errors",
         "deep arguments", "deep errors and result"],
)  # fmt: skip
async def test_every_stored_row_can_be_read_back(
    start_jobs: StartJobs,
    connection: asyncpg.Connection[Any],
    caplog: pytest.LogCaptureFixture,
    payload: str,
    errors: str,
    result: str | None,
) -> None:
    job_id = await connection.fetchval(
        "INSERT INTO starlette_jobs (name, queue, payload, status, max_attempts, errors, result,"
        " finished_at) VALUES ('nobody.knows', 'default', $1::jsonb, 'failed', 1, $2::jsonb,"
        " $3::jsonb, now()) RETURNING id",
        payload,
        errors,
        result,
    )
    async with start_jobs(queues={}) as jobs:
        record = await jobs.get(job_id)
        assert await jobs.list() == [record]
    assert record is not None
    assert record.status is JobStatus.FAILED
    if HUGE_TEXT in payload:
        assert record.arguments == {"n": decimal.Decimal(HUGE_TEXT)}  # every digit kept
    if result is not None and HUGE_TEXT in result:
        assert record.result == [decimal.Decimal(HUGE_TEXT), 1]
    if HUGE_TEXT in errors:
        assert record.errors[0]["n"] == decimal.Decimal("-" + HUGE_TEXT)
    if DEEP in (payload, errors):
        assert f"job {job_id}" in caplog.text
        assert "cannot be decoded" in caplog.text


@pytest.mark.parametrize("row_id", [2**63, -1, 0, "abc", "", "1.5", "٣", 1.5, True, None])
async def test_an_id_no_workflow_or_bulk_action_can_have_finds_nothing(
    start_jobs: StartJobs, row_id: Any
) -> None:
    """PostgreSQL took `True` and `1.5` for workflow 1 (and cancelled it), and failed on
    "abc" with the driver's own error; the memory store found nothing. Both find nothing now."""
    async with start_jobs(queues={}) as jobs:
        flow = Workflow("w")
        flow.add("a", typed, n=1)
        assert (await flow.enqueue(jobs=jobs)).id == 1
        assert (await jobs.begin_bulk("retry", queue="default")).id == 1
        assert await jobs.workflow(row_id) is None
        assert await jobs.cancel_workflow(row_id) == 0
        assert await jobs.get_bulk(row_id) is None
        assert await jobs.run_bulk(row_id) is None
        workflow = await jobs.workflow(1)
        assert workflow is not None
        assert workflow.statuses == {"a": JobStatus.PENDING}
        bulk = await jobs.get_bulk(1)
        assert bulk is not None
        assert not bulk.finished
        with pytest.raises(ValueError, match="limit must be an integer from 1 to 1000"):
            await jobs.list_bulks(-1)


def test_a_workflow_name_postgresql_cannot_store_is_refused_at_once() -> None:
    for name, why in [("a\x00b", "NUL character"), ("a\ud800", "lone surrogate")]:
        with pytest.raises(WorkflowDefinitionError, match=why):
            Workflow(name)


@pytest.mark.parametrize(
    "job_id", [2**63, -(2**63) - 1, "9" * 5000, "abc", "12x", "", "1.5", "٣", 1.5, True, None]
)
async def test_an_id_no_job_can_have_finds_nothing(start_jobs: StartJobs, job_id: Any) -> None:
    async with start_jobs(queues={}) as jobs:
        # Jobs 1 to 3, which True (1), 1.5 or "٣" (an Arabic-Indic 3) must not be taken for.
        assert await typed.enqueue_many([{"n": 1}] * 3) == [1, 2, 3]
        existing = 3
        assert await jobs.get(job_id) is None
        for change in (jobs.cancel, jobs.retry, jobs.release):
            with pytest.raises(JobNotFoundError, match="no job with id"):
                await change(job_id)
        # An id that went through a URL, untyped: what a handler often has in hand.
        record = await jobs.get(str(existing))  # type: ignore[arg-type]
        assert record is not None
        assert record.id == existing
