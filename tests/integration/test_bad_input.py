"""Bad input is refused at enqueue with a clear error and writes nothing; text that looks like
SQL is stored as it is; a row with a malformed trace context still runs."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import asyncpg
import pytest

from starlette_jobs import (
    JobArgumentsError,
    JobDefinitionError,
    Jobs,
    JobStatus,
    Retry,
    correlation_id,
    job,
)
from starlette_jobs._correlation import correlation_scope
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


ONE_MIB = 1024 * 1024

# (case, the call, the error it raises, a phrase the message must contain)
REFUSED: list[tuple[str, Callable[[], Awaitable[Any]], type[Exception], str]] = [
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
]  # fmt: skip


@pytest.mark.parametrize(
    ("call", "error", "phrase"),
    [pytest.param(call, error, phrase, id=case) for case, call, error, phrase in REFUSED],
)
async def test_bad_input_is_refused_clearly_and_writes_nothing(
    start_jobs: StartJobs,
    connection: asyncpg.Connection[Any],
    call: Callable[[], Awaitable[Any]],
    error: type[Exception],
    phrase: str,
) -> None:
    async with start_jobs(queues={}):
        with pytest.raises(error) as raised:
            await call()
    assert phrase in str(raised.value)
    assert await connection.fetchval("SELECT count(*) FROM starlette_jobs") == 0


@pytest.mark.parametrize(
    ("name", "phrase"),
    [("", "invalid job name ''"), ("j" * 201, "1 to 200"), ("send mail", "invalid job name"),
     ("x'); DROP TABLE t;--", "invalid job name"), ("名前", "invalid job name")],
)  # fmt: skip
def test_bad_job_names_are_refused_where_the_job_is_declared(name: str, phrase: str) -> None:
    with pytest.raises(JobDefinitionError, match=phrase):

        @job(name=name)
        async def anything() -> None:
            pass


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
