"""`Jobs(schema=...)` on PostgreSQL and memory alike: two apps that name different schemas of
one database (or one named memory store) share nothing: each drains, lists and counts only its
own jobs. What only PostgreSQL shows (the tables in each schema, the channels, the migrations,
a caller's connection) is in tests/postgres/test_schema.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from starlette_jobs import (
    JobDefinitionError,
    Jobs,
    JobStatus,
    OnSuccessError,
    OnSuccessMiddleware,
    job,
)

ran: list[tuple[str, int]] = []


@pytest.fixture(autouse=True)
def _nothing_ran_yet() -> None:
    ran.clear()


@job
async def billed(app: str, n: int) -> int:
    ran.append((app, n))
    return n


@pytest.fixture
async def two_apps(jobs_dsn: str) -> AsyncIterator[tuple[Jobs, Jobs]]:
    """Two apps on the same database (or named memory store), in schemas of their own: billing
    with a worker, mail enqueueing only (so that a mail job that runs was billing's doing)."""
    async with AsyncExitStack() as stack:
        billing = await stack.enter_async_context(
            Jobs(jobs_dsn, schema="billing", poll_interval=0.05)
        )
        mail = await stack.enter_async_context(Jobs(jobs_dsn, schema="mail", queues={}))
        yield billing, mail


async def test_each_app_drains_only_the_jobs_of_its_own_schema(
    two_apps: tuple[Jobs, Jobs],
) -> None:
    billing, mail = two_apps
    billing_ids = [await billing.enqueue(billed, "billing", n) for n in range(3)]
    mail_ids = [await mail.enqueue(billed, "mail", n) for n in range(2)]
    await billing.drain(timeout=10)
    assert sorted(ran) == [("billing", 0), ("billing", 1), ("billing", 2)]
    # The mail app's jobs were not touched: still pending, and not listed by billing.
    assert (await mail.count_by_status())[JobStatus.PENDING] == 2
    assert {record.id for record in await billing.list()} == set(billing_ids)
    async with mail.replace(queues={"default": 10}, poll_interval=0.05) as mail_worker:
        await mail_worker.drain(timeout=10)
    assert sorted(ran) == [("billing", 0), ("billing", 1), ("billing", 2), ("mail", 0), ("mail", 1)]
    assert [(await mail.wait(i, timeout=5)).result for i in mail_ids] == [0, 1]
    assert (await billing.count_by_status())[JobStatus.SUCCEEDED] == 3


async def test_a_job_id_names_a_job_of_the_schema_it_is_read_from(
    two_apps: tuple[Jobs, Jobs],
) -> None:
    """Each schema counts its own ids: the same id in another app is another job, or none."""
    billing, mail = two_apps
    billing_id = await billing.enqueue(billed, "billing", 7)
    await billing.drain(timeout=10)
    record = await mail.get(billing_id)
    assert record is None or record.arguments != {"app": "billing", "n": 7}
    assert (await billing.wait(billing_id, timeout=5)).result == 7


async def test_an_app_without_a_schema_does_not_see_a_schemas_jobs(jobs_dsn: str) -> None:
    async with (
        Jobs(jobs_dsn, queues={}) as plain,
        Jobs(jobs_dsn, schema="billing", poll_interval=0.05) as billing,
    ):
        await billing.enqueue(billed, "billing", 1)
        assert (await plain.count_by_status())[JobStatus.PENDING] == 0
        await plain.enqueue(billed, "plain", 2)
        await billing.drain(timeout=10)
        assert ran == [("billing", 1)]
        assert (await plain.count_by_status())[JobStatus.PENDING] == 1


@pytest.mark.parametrize(
    "name", ["Billing", "1st", "a-b", 'x"; DROP TABLE jobs; --', "", "pg_jobs", "a" * 64, 5]
)
def test_a_schema_name_that_is_not_a_plain_identifier_is_refused(name: object) -> None:
    with pytest.raises(JobDefinitionError, match="schema name"):
        Jobs("memory://", schema=name)  # type: ignore[arg-type]


async def test_on_success_jobs_for_two_schemas_in_one_request_are_refused_as_enqueued(
    two_apps: tuple[Jobs, Jobs],
) -> None:
    """One request's jobs are written in one transaction, on one schema's connection: the
    second schema's were written into the first's tables (where its worker never looked, under
    ids the first's sequence then handed out again)."""
    billing, mail = two_apps
    refused: list[str] = []

    async def both(request: Request) -> Response:
        await billed.configure(jobs=billing, on_success=True).enqueue(app="billing", n=1)
        try:
            await billed.configure(jobs=mail, on_success=True).enqueue(app="mail", n=2)
        except OnSuccessError as error:
            refused.append(str(error))
            raise
        return Response(status_code=202)

    app = Starlette(routes=[Route("/", both)], middleware=[Middleware(OnSuccessMiddleware)])
    transport = httpx2.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx2.AsyncClient(transport=transport, base_url="http://test") as client:
        assert (await client.get("/")).status_code == 500
    assert (await billing.list(), await mail.list()) == ([], [])
    [message] = refused
    assert "schema" in message
