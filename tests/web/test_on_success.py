"""On-success enqueue (`web/_on_success.py` around `_held_jobs.py`): a job enqueued with
`on_success=True` during a request is written before the response goes out if its status is
below 400, and never otherwise; a write that fails turns the response into an error. On
PostgreSQL and on the memory store alike (whose reserved ids the contract suite holds to
PostgreSQL's). A client that disconnects
mid-request is in integration/test_requests.py, on a real server. FastAPI's usual session
dependency, which commits after the response went out, and the two patterns that are safe with
it, are at the end."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Annotated, Any

import asyncpg
import httpx2
import pytest
from fastapi import Body, Depends, FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from starlette_jobs import (
    DatabaseUnavailableError,
    IdempotencyKeyReusedError,
    JobArgumentsError,
    Jobs,
    JobStatus,
    OnSuccessError,
    OnSuccessMiddleware,
    job,
)
from starlette_jobs._records import NewJobs
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.testing import eager

ran: list[int] = []


@job
async def receipt(order: int) -> None:
    ran.append(order)


async def order(request: Request) -> Response:
    """Enqueues a receipt, then ends as the request asks: a status, or an exception."""
    body = await request.json()
    job_id = await receipt.configure(on_success=True).enqueue(order=body["order"])
    outcome = body.get("outcome", 202)
    if outcome == "raise":
        raise RuntimeError("the handler failed after enqueueing")
    if outcome == "http_exception":
        raise HTTPException(404, "no such order")
    return JSONResponse({"job_id": job_id}, status_code=outcome)


async def orders(request: Request) -> Response:
    items = [{"order": n} for n in (await request.json())["orders"]]
    ids = await receipt.configure(on_success=True).enqueue_many(items)
    return JSONResponse({"job_ids": ids}, status_code=202)


class SeenAtStart:
    """An ASGI middleware outside `OnSuccessMiddleware`: what the store held when the response
    started on its way out."""

    def __init__(self, app: ASGIApp, jobs: Jobs) -> None:
        self.app, self.jobs = app, jobs
        self.counts: list[int] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def look(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.counts.append(sum((await self.jobs.count_by_status()).values()))
            await send(message)

        await self.app(scope, receive, look)


def app_for(jobs: Jobs) -> tuple[SeenAtStart, httpx2.AsyncClient]:
    app = Starlette(
        routes=[
            Route("/orders", order, methods=["POST"]),
            Route("/batch", orders, methods=["POST"]),
        ],
        middleware=[Middleware(OnSuccessMiddleware)],
    )
    seen = SeenAtStart(app, jobs)
    transport = httpx2.ASGITransport(app=seen, raise_app_exceptions=False)
    return seen, httpx2.AsyncClient(transport=transport, base_url="http://test")


@pytest.fixture
async def jobs(jobs_dsn: str) -> AsyncIterator[Jobs]:
    async with Jobs(jobs_dsn, poll_interval=0.1) as started:
        yield started


async def stored(jobs: Jobs) -> list[tuple[int, dict[str, Any]]]:
    return [(record.id, record.arguments) for record in await jobs.list()]


@pytest.mark.parametrize("status", [200, 201, 202, 204, 303])
async def test_a_successful_response_writes_the_job_before_it_goes_out(
    jobs: Jobs, status: int
) -> None:
    ran.clear()
    seen, client = app_for(jobs)
    async with client:
        response = await client.post("/orders", json={"order": 7, "outcome": status})
    assert response.status_code == status
    [(job_id, arguments)] = await stored(jobs)
    assert arguments == {"order": 7}
    if status != 204:
        assert response.json() == {"job_id": job_id}  # the id the handler had is the row's
    assert seen.counts == [1]  # written before the response started on its way out
    await jobs.drain()
    assert ran == [7]
    record = await jobs.get(job_id)
    assert record is not None
    assert record.status is JobStatus.SUCCEEDED


@pytest.mark.parametrize("status", [400, 404, 422, 500, 503])
async def test_an_error_response_writes_nothing(jobs: Jobs, status: int) -> None:
    _, client = app_for(jobs)
    async with client:
        response = await client.post("/orders", json={"order": 7, "outcome": status})
    assert response.status_code == status
    assert await jobs.get(response.json()["job_id"]) is None
    assert await stored(jobs) == []


@pytest.mark.parametrize(("outcome", "status"), [("raise", 500), ("http_exception", 404)])
async def test_a_handler_that_raises_writes_nothing(jobs: Jobs, outcome: str, status: int) -> None:
    _, client = app_for(jobs)
    async with client:
        response = await client.post("/orders", json={"order": 7, "outcome": outcome})
        assert response.status_code == status
        assert await stored(jobs) == []
        # The next request is not haunted by what this one held.
        response = await client.post("/orders", json={"order": 8})
    assert await stored(jobs) == [(response.json()["job_id"], {"order": 8})]


async def get_once(endpoint: Any, *, raise_app_exceptions: bool = True) -> httpx2.Response:
    """One GET of `endpoint`, served at "/" by an app under `OnSuccessMiddleware`."""
    app = Starlette(routes=[Route("/", endpoint)], middleware=[Middleware(OnSuccessMiddleware)])
    transport = httpx2.ASGITransport(app=app, raise_app_exceptions=raise_app_exceptions)
    async with httpx2.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.get("/")


async def test_a_batch_is_written_whole(jobs: Jobs) -> None:
    _, client = app_for(jobs)
    async with client:
        response = await client.post("/batch", json={"orders": [1, 2, 3]})
    ids = response.json()["job_ids"]
    expected = [(job_id, {"order": n}) for job_id, n in zip(ids, [1, 2, 3], strict=True)]
    assert sorted(await stored(jobs)) == expected


async def test_bad_arguments_are_refused_during_the_handler() -> None:
    async def bad(request: Request) -> Response:
        try:
            await receipt.configure(on_success=True).enqueue(order="seven")  # type: ignore[arg-type]
        except JobArgumentsError as error:
            return JSONResponse({"errors": len(error.errors)}, status_code=422)
        return Response(status_code=202)

    async with Jobs("memory://", queues={}) as jobs:
        response = await get_once(bad)
        assert (response.status_code, response.json()) == (422, {"errors": 1})
        assert await stored(jobs) == []


async def test_outside_a_request_the_option_is_refused_clearly() -> None:
    async with Jobs("memory://", queues={}) as jobs:
        with pytest.raises(OnSuccessError, match="add OnSuccessMiddleware"):
            await receipt.configure(on_success=True).enqueue(order=1)
        assert await stored(jobs) == []


async def test_after_the_response_started_the_option_is_refused_clearly() -> None:
    refused: list[str] = []

    async def late(request: Request) -> Response:
        async def after() -> None:
            try:
                await receipt.configure(on_success=True).enqueue(order=1)
            except OnSuccessError as error:
                refused.append(str(error))

        return Response(status_code=202, background=BackgroundTask(after))

    async with Jobs("memory://", queues={}) as jobs:
        assert (await get_once(late)).status_code == 202
        assert len(refused) == 1
        assert "has started already (status 202)" in refused[0]
        assert await stored(jobs) == []


async def test_a_job_the_database_refuses_turns_the_success_into_a_500(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    # An operator's own rule, which the write breaks: a real error from PostgreSQL.
    await connection.execute(
        "ALTER TABLE starlette_jobs ADD CONSTRAINT no_13 CHECK (payload->>'order' <> '13')"
    )
    async with Jobs(database_dsn, queues={}) as jobs:
        _, client = app_for(jobs)
        async with client:
            refused = await client.post("/orders", json={"order": 13})
            accepted = await client.post("/orders", json={"order": 14})
        assert refused.status_code == 500
        assert "could not be written" in refused.json()["detail"]
        assert accepted.status_code == 202
        assert await stored(jobs) == [(accepted.json()["job_id"], {"order": 14})]


class _UnreachableMemoryStore(MemoryStore):
    """The memory store, its database gone at the moment the request's jobs are written."""

    async def insert_reserved(self, batch: Sequence[NewJobs]) -> set[int]:
        raise DatabaseUnavailableError("could not write: PostgreSQL is unreachable")


async def test_a_database_gone_at_the_write_turns_the_success_into_a_503(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("starlette_jobs.memory._store.MemoryStore", _UnreachableMemoryStore)
    async with Jobs("memory://", queues={}) as jobs:
        assert isinstance(jobs._ready_store, _UnreachableMemoryStore)
        _, client = app_for(jobs)
        async with client:
            response = await client.post("/orders", json={"order": 1})
        assert (response.status_code, response.headers["retry-after"]) == (503, "1")
        assert await stored(jobs) == []


async def test_a_refused_success_does_not_run_the_responses_background_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The handler's response carried a `BackgroundTask` (an email saying the order is in):
    the client was answered 503 instead, and the task must not run. It used to: only the
    response's messages were dropped, and Starlette then ran its background task."""
    monkeypatch.setattr("starlette_jobs.memory._store.MemoryStore", _UnreachableMemoryStore)
    told: list[int] = []

    async def confirm(request: Request) -> Response:
        job_id = await receipt.configure(on_success=True).enqueue(order=7)
        return JSONResponse({"job_id": job_id}, 202, background=BackgroundTask(told.append, 7))

    async with Jobs("memory://", queues={}) as jobs:
        response = await get_once(confirm)
        assert response.status_code == 503
        assert await stored(jobs) == []
    assert told == []


async def test_a_key_taken_by_a_request_at_the_same_time_answers_409(jobs: Jobs) -> None:
    async def racing(request: Request) -> Response:
        held = receipt.configure(on_success=True, idempotency_key="k")
        job_id = await held.enqueue(order=1)
        await receipt.configure(on_success=True).enqueue(order=3)  # a job without a key
        # Another request, with the same key, got its job written in the meantime.
        other = await receipt.configure(idempotency_key="k").enqueue(order=2)
        return JSONResponse({"job_id": job_id, "other": other}, status_code=202)

    response = await get_once(racing)
    assert response.status_code == 409
    [(_, arguments)] = await stored(jobs)
    assert arguments == {"order": 2}  # the other request's; none of this one's


async def test_a_key_given_twice_in_one_request_names_one_job(jobs: Jobs) -> None:
    """As without on_success: the second enqueue gets the first's job (it answered 409 for
    ever, both ids reserved and the second refused by the key's index at the write)."""

    async def twice(request: Request) -> Response:
        keyed = receipt.configure(on_success=True, idempotency_key="k")
        unique = receipt.configure(on_success=True, unique_key="u")
        ids = [
            await keyed.enqueue(order=1),
            await keyed.enqueue(order=1),
            await unique.enqueue(order=2),
            await unique.enqueue(order=3),  # a unique key's holder, whatever its arguments
        ]
        return JSONResponse({"ids": ids}, status_code=202)

    response = await get_once(twice)
    assert response.status_code == 202
    first, again, holder, also = response.json()["ids"]
    assert (again, also) == (first, holder)
    assert sorted(await stored(jobs)) == [(first, {"order": 1}), (holder, {"order": 2})]


async def test_a_key_given_again_in_one_request_with_other_arguments_is_refused(
    jobs: Jobs,
) -> None:
    refused: list[IdempotencyKeyReusedError] = []

    async def twice(request: Request) -> Response:
        keyed = receipt.configure(on_success=True, idempotency_key="k")
        first = await keyed.enqueue(order=1)
        try:
            await keyed.enqueue(order=2)
        except IdempotencyKeyReusedError as error:
            refused.append(error)
        return JSONResponse({"id": first}, status_code=202)

    response = await get_once(twice)
    [error] = refused
    assert error.job_id == response.json()["id"]
    assert await stored(jobs) == [(response.json()["id"], {"order": 1})]


async def test_in_eager_mode_a_held_job_runs_once_written_and_a_dropped_one_never(
    jobs: Jobs,
) -> None:
    ran.clear()
    _, client = app_for(jobs)
    with eager(jobs):
        async with client:
            accepted = await client.post("/orders", json={"order": 1})
            assert ran == [1]  # ran before the response came back
            refused = await client.post("/orders", json={"order": 2, "outcome": 400})
    assert (accepted.status_code, refused.status_code) == (202, 400)
    assert ran == [1]
    record = await jobs.get(accepted.json()["job_id"])
    assert record is not None
    assert record.status is JobStatus.SUCCEEDED


# -- FastAPI's session dependency that commits after `yield` ------------------------------------


@job
async def welcome(email: str) -> None: ...


async def session_of_the_request(request: Request) -> AsyncIterator[AsyncSession]:
    """FastAPI's usual session dependency: the path operation's writes commit after `yield`."""
    async with AsyncSession(request.app.state.engine) as session:
        yield session
        await session.commit()


# FastAPI's default scope for a `yield` dependency is the request: its exit code (the commit)
# runs once the response has gone out. Scope "function" ends it before the response starts.
RequestSession = Annotated[AsyncSession, Depends(session_of_the_request)]
FunctionSession = Annotated[AsyncSession, Depends(session_of_the_request, scope="function")]
Email = Annotated[str, Body(embed=True)]
SIGN_UP = text("INSERT INTO accounts (email) VALUES (:email)")


async def sign_up_on_success(email: Email, session: RequestSession) -> dict[str, int]:
    await session.execute(SIGN_UP, {"email": email})
    return {"job_id": await welcome.configure(on_success=True).enqueue(email=email)}


async def sign_up_on_success_function_scope(
    email: Email, session: FunctionSession
) -> dict[str, int]:
    await session.execute(SIGN_UP, {"email": email})
    return {"job_id": await welcome.configure(on_success=True).enqueue(email=email)}


async def sign_up_in_the_session(email: Email, session: RequestSession) -> dict[str, int]:
    await session.execute(SIGN_UP, {"email": email})
    return {"job_id": await welcome.configure(connection=session).enqueue(email=email)}


@pytest.fixture
async def accounts(database_dsn: str) -> AsyncIterator[FastAPI]:
    """A FastAPI app whose sign-ups commit in a session dependency, on a table whose unique
    email is checked at commit (deferred): the path operation's insert passes, its commit fails.
    """
    engine = create_async_engine(database_dsn.replace("postgresql://", "postgresql+asyncpg://"))
    async with engine.begin() as connection:
        await connection.execute(
            text("CREATE TABLE accounts (email text UNIQUE DEFERRABLE INITIALLY DEFERRED)")
        )
        await connection.execute(text("INSERT INTO accounts VALUES ('taken@example.com')"))
    app = FastAPI(middleware=[Middleware(OnSuccessMiddleware)])
    app.state.engine = engine
    for path, endpoint in [
        ("/on-success", sign_up_on_success),
        ("/on-success-function-scope", sign_up_on_success_function_scope),
        ("/in-the-session", sign_up_in_the_session),
    ]:
        app.add_api_route(path, endpoint, methods=["POST"], status_code=201)
    yield app
    await engine.dispose()


async def sign_up_twice(app: FastAPI, path: str, jobs: Jobs) -> tuple[int, list[str], list[str]]:
    """A new email signed up, then one taken: the status of the second, the accounts and the
    welcome jobs there are."""
    transport = httpx2.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx2.AsyncClient(transport=transport, base_url="http://test") as client:
        assert (await client.post(path, json={"email": "new@example.com"})).status_code == 201
        taken = await client.post(path, json={"email": "taken@example.com"})
    async with AsyncSession(app.state.engine) as session:
        emails = (await session.execute(text("SELECT email FROM accounts ORDER BY 1"))).scalars()
        accounts = list(emails)
    welcomed = [r.arguments["email"] for r in await jobs.list() if r.name == welcome.name]
    return taken.status_code, accounts, sorted(welcomed)


async def test_a_commit_after_the_response_fails_after_the_job_was_written(
    accounts: FastAPI, jobs_dsn: str
) -> None:
    """The failure mode: the response starts (201), which writes the held job; only then does
    the dependency commit, and fail. A welcome job for an account that does not exist."""
    async with Jobs(jobs_dsn, queues={}) as jobs:
        status, emails, welcomed = await sign_up_twice(accounts, "/on-success", jobs)
    assert status == 201
    assert emails == ["new@example.com", "taken@example.com"]  # the second sign-up is gone
    assert welcomed == ["new@example.com", "taken@example.com"]  # but its job is not


async def test_a_dependency_of_function_scope_commits_before_the_job_is_written(
    accounts: FastAPI, jobs_dsn: str
) -> None:
    async with Jobs(jobs_dsn, queues={}) as jobs:
        status, emails, welcomed = await sign_up_twice(accounts, "/on-success-function-scope", jobs)
    assert status == 500  # the commit failed before the response: the client is told
    assert emails == ["new@example.com", "taken@example.com"]
    assert welcomed == ["new@example.com"]


async def test_a_job_enqueued_in_the_session_commits_or_rolls_back_with_it(
    accounts: FastAPI, database_dsn: str
) -> None:
    """`connection=session` needs PostgreSQL: the job is a row of the session's transaction."""
    async with Jobs(database_dsn, queues={}) as jobs:
        status, emails, welcomed = await sign_up_twice(accounts, "/in-the-session", jobs)
    # No job without its account. The client still heard 201 for a rollback: the commit runs
    # after the response, which only a dependency of function scope changes.
    assert status == 201
    assert emails == ["new@example.com", "taken@example.com"]
    assert welcomed == ["new@example.com"]


async def test_jobs_of_two_jobs_on_one_database_are_written_all_or_none(jobs_dsn: str) -> None:
    """Two `Jobs` on one database (one memory store's data): one transaction for both."""

    async def both(request: Request) -> Response:
        first = await receipt.configure(jobs=one, on_success=True).enqueue(order=1)
        keyed = receipt.configure(jobs=other, on_success=True, idempotency_key="k")
        second = await keyed.enqueue(order=2)
        # Another request, with the same key, got its job written in the meantime.
        taken = await receipt.configure(jobs=other, idempotency_key="k").enqueue(order=3)
        return JSONResponse({"ids": [first, second], "taken": taken}, status_code=202)

    async with Jobs(jobs_dsn, queues={}) as one, Jobs(jobs_dsn, queues={}) as other:
        response = await get_once(both)
        assert response.status_code == 409
        [(_, arguments)] = await stored(one)
        assert arguments == {"order": 3}  # the other request's; none of this one's


async def test_jobs_for_two_databases_in_one_request_are_refused_as_enqueued(
    jobs_dsn: str,
) -> None:
    """One transaction cannot span two databases: the second is refused before anything is
    written, rather than risk the first's jobs written without the second's."""
    refused: list[str] = []

    async def both(request: Request) -> Response:
        await receipt.configure(jobs=one, on_success=True).enqueue(order=1)
        try:
            await receipt.configure(jobs=elsewhere, on_success=True).enqueue(order=2)
        except OnSuccessError as error:
            refused.append(str(error))
            raise
        return Response(status_code=202)

    async with Jobs(jobs_dsn, queues={}) as one, Jobs("memory://", queues={}) as elsewhere:
        assert (await get_once(both, raise_app_exceptions=False)).status_code == 500
        assert (await stored(one), await stored(elsewhere)) == ([], [])
    [message] = refused
    assert "one database" in message
