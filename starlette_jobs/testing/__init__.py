"""Testing your own jobs: a pytest plugin, and helpers that read well in a test.

Enable the plugin in your `conftest.py`, one line:

    pytest_plugins = ["starlette_jobs.testing"]

Fixtures:

- `jobs_database`: the URL of a fresh, migrated database for this test alone, cloned from a
  template migrated once per test session. The session's databases live on the server in
  `DATABASE_URL` (new databases, dropped at the end) or, without it, on an embedded PostgreSQL
  in a temporary directory: never your dev server's data directory.
- `jobs_memory`: a `memory://` URL of an in-memory store of this test's own, for fast tests
  that need no database.

Helpers, for a test that enqueued something (through its app, say):

- `await run_enqueued(jobs)` (or `run_enqueued_now(client)` from a sync test with Starlette's
  `TestClient`): runs every job enqueued so far, and those they enqueue, until nothing is due
  (retries due within a minute included), even when the app's own `Jobs` runs no worker
  (`queues={}`).
- `await assert_enqueued(jobs, job, **arguments)` (or `assert_enqueued_now(client, ...)`): the
  job enqueued with these arguments, or an `AssertionError` that lists what was enqueued
  instead.
- `with eager(jobs):`: every job enqueued in the block runs before `enqueue` returns.
- `with simulate_outage(jobs):` (on `memory://`): the store fails as an unavailable database
  does, for the block, a number of calls or a time.

docs/testing.md shows them at work.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import itertools
import json
import os
import tempfile
import uuid
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from .._job import Job, registered_jobs
from .._jobs import Jobs
from .._records import JobRecord, JobStatus
from ..memory._outage import SimulatedOutage
from ..memory._store import MemoryStore, is_memory_dsn
from ..postgres._connections import run_admin_statements
from ..postgres._embedded import release_embedded_postgres, start_embedded_postgres
from ..postgres._store import PostgresStore
from ..worker._settings import DEFAULT_RETRY_WAIT, WorkerSettings, check_drain_durations
from ..worker._worker import Worker

__all__ = [
    "SimulatedOutage",
    "assert_enqueued",
    "assert_enqueued_now",
    "eager",
    "jobs_database",
    "jobs_memory",
    "jobs_server",
    "jobs_template_database",
    "run_enqueued",
    "run_enqueued_now",
    "simulate_outage",
]

# -- fixtures ----------------------------------------------------------------------------------


def _with_database(dsn: str, database: str) -> str:
    return urlunsplit(urlsplit(dsn)._replace(path="/" + database))


def _run(statements: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Runs the coroutine `statements()` makes to its end, from a sync fixture: on a loop of its
    own, in a thread of its own when this thread runs a loop already (an async test that takes
    the fixture through `request.getfixturevalue`), since `asyncio.run` cannot run inside one."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(statements())
        return
    with ThreadPoolExecutor(1, thread_name_prefix="starlette-jobs-fixture") as thread:
        thread.submit(lambda: asyncio.run(statements())).result()


def _admin(server: str, statement: str) -> None:
    _run(lambda: run_admin_statements(server, statement))


def _configured_server() -> str | None:
    """`DATABASE_URL`, unless it is unset or names an in-memory store (`memory://`, which a
    project may set for its app's own tests): no PostgreSQL server to make databases on."""
    configured = os.environ.get("DATABASE_URL")
    if not configured or is_memory_dsn(configured):
        return None
    return configured


@pytest.fixture(scope="session")
def jobs_server() -> Iterator[str]:
    """The URL of the server this test session's databases live on: `DATABASE_URL`'s, or an
    embedded PostgreSQL in a temporary directory, stopped at the end of the session."""
    configured = _configured_server()
    if configured:
        yield configured
        return
    with tempfile.TemporaryDirectory(prefix="starlette-jobs-tests-") as scratch:
        data_dir = Path(scratch) / "pgdata"
        try:
            yield start_embedded_postgres(data_dir)
        finally:
            release_embedded_postgres(data_dir)


@pytest.fixture(scope="session")
def jobs_template_database(jobs_server: str) -> Iterator[str]:
    """The name of a database migrated once for the session, cloned by `jobs_database`."""
    name = f"sj_template_{os.getpid()}_{uuid.uuid4().hex[:8]}"

    async def create() -> None:
        await run_admin_statements(jobs_server, f'CREATE DATABASE "{name}"')
        store = await PostgresStore.open(_with_database(jobs_server, name), min_size=1, max_size=1)
        try:
            await store.migrate()
        finally:
            await store.close()

    _run(create)
    yield name
    _admin(jobs_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


_database_numbers = itertools.count()


@pytest.fixture
def jobs_database(jobs_server: str, jobs_template_database: str) -> Iterator[str]:
    """The URL of a fresh, migrated database of this test's own; dropped after it."""
    name = f"sj_test_{os.getpid()}_{next(_database_numbers)}"
    create = f'CREATE DATABASE "{name}" TEMPLATE "{jobs_template_database}"'
    _admin(jobs_server, create)
    yield _with_database(jobs_server, name)
    _admin(jobs_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def jobs_memory() -> str:
    """A `memory://` URL naming an in-memory store of this test's own."""
    return f"memory://test-{uuid.uuid4().hex}"


# -- helpers -------------------------------------------------------------------------------------

# Set while `run_enqueued` runs jobs, so that an eager enqueue inside a job leaves the new job
# to the run in progress instead of starting another one (which would wait for its own caller).
_running_enqueued: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "starlette_jobs_running_enqueued", default=False
)


def _jobs_of(target: Any) -> Jobs:
    """`target` itself, or the started `Jobs` of an app (`app.state.jobs`)."""
    if isinstance(target, Jobs):
        return target
    state = getattr(getattr(target, "state", None), "jobs", None)
    if isinstance(state, Jobs):
        return state
    raise TypeError(
        f"{target!r} is neither a Jobs nor an app whose lifespan started one "
        "(app.state.jobs): use `with TestClient(app) as client:` so that the lifespan runs"
    )


async def run_enqueued(
    target: Jobs | Any, *, timeout: float = 30.0, retry_wait: float = DEFAULT_RETRY_WAIT
) -> None:
    """Runs every job enqueued so far, and those they enqueue, until nothing is due now, nor a
    retry within `retry_wait` seconds. Jobs enqueued with `delay=` or `run_at=` are left for
    later; what is left is logged.

    Args:
        target: a started `Jobs`, or an app whose lifespan started one.
        timeout: seconds to wait at most.
        retry_wait: how far ahead a retry is waited for (never past `timeout`); 0 leaves every
            retry that is not due yet.

    Raises:
        TimeoutError: jobs were still due or running after `timeout` seconds.
        ValueError: `timeout` or `retry_wait` is NaN or negative.

    Example:
        >>> response = client.post("/signup", json={"email": "ada@example.com"})
        >>> await run_enqueued(app)
    """
    check_drain_durations(timeout, retry_wait)
    jobs = _jobs_of(target)
    store = jobs._ready_store
    queues = {job.queue for job in registered_jobs()} | set(jobs.config.queues)
    queues |= {record.queue for record in await store.list_jobs(JobStatus.PENDING, None, 10_000)}
    config = jobs.config
    settings = WorkerSettings(
        queues=dict.fromkeys(sorted(queues), max(config.queues.values(), default=10)),
        batch_size=config.batch_size,
        poll_interval=min(config.poll_interval, 0.1),
        lease_duration=config.lease_duration,
        shutdown_grace=config.shutdown_grace,
        retention=None,
    )
    worker = Worker(store, settings, jobs._tracing)
    token = _running_enqueued.set(True)
    try:
        await worker.start()
        try:
            await worker.drain(timeout, include_scheduled=False, retry_wait=retry_wait)
        finally:
            await worker.stop()
    finally:
        _running_enqueued.reset(token)


def run_enqueued_now(
    client: Any, *, timeout: float = 30.0, retry_wait: float = DEFAULT_RETRY_WAIT
) -> None:
    """`run_enqueued` from a sync test, through Starlette's `TestClient` (entered with
    `with TestClient(app) as client:`, so that the app's lifespan has started its `Jobs`)."""
    portal = getattr(client, "portal", None)
    if portal is None:
        raise TypeError(
            "use `with TestClient(app) as client:`: outside the block the app's lifespan, and "
            "so its Jobs, is not running"
        )
    portal.call(functools.partial(run_enqueued, client.app, timeout=timeout, retry_wait=retry_wait))


async def assert_enqueued(
    target: Jobs | Any, job: Job[..., Any] | str, /, **arguments: Any
) -> JobRecord:
    """The job `job` enqueued with exactly these `arguments` (as they are stored, in JSON), in
    any status; the most recent if there are several.

    Raises:
        AssertionError: no such job; the message lists what `job` was enqueued with instead.

    Example:
        >>> record = await assert_enqueued(app, send_welcome, email="ada@example.com")
    """
    jobs = _jobs_of(target)
    name = job if isinstance(job, str) else job.name
    expected = arguments
    if not isinstance(job, str):
        # As the row holds them: validated and serialized the way enqueue does.
        expected = json.loads(job._arguments.serialize((), arguments))
    found = [record for record in await jobs.list(limit=10_000) if record.name == name]
    for record in found:
        if record.arguments == expected:
            return record
    seen = "\n".join(f"  {record.id}: {record.arguments}" for record in found) or "  nothing"
    raise AssertionError(f"no {name} job was enqueued with {expected}; enqueued:\n{seen}")


def assert_enqueued_now(client: Any, job: Job[..., Any] | str, /, **arguments: Any) -> JobRecord:
    """`assert_enqueued` from a sync test, through Starlette's `TestClient` (see
    `run_enqueued_now`)."""
    portal = getattr(client, "portal", None)
    if portal is None:
        raise TypeError(
            "use `with TestClient(app) as client:`: outside the block the app's lifespan, and "
            "so its Jobs, is not running"
        )
    found: JobRecord = portal.call(functools.partial(assert_enqueued, client.app, job, **arguments))
    return found


@contextmanager
def eager(target: Jobs | Any) -> Iterator[None]:
    """Within the block, every job is run before `enqueue` returns (those it enqueues too).

    Example:
        >>> with eager(jobs):
        ...     await send_welcome.enqueue(user_id=1, email="ada@example.com")  # has run
    """
    jobs = _jobs_of(target)

    async def run_now(ids: list[int]) -> None:
        if not _running_enqueued.get():
            await run_enqueued(jobs)

    enqueuer = jobs._ready_enqueuer
    previous = enqueuer.after_enqueue
    enqueuer.after_enqueue = run_now
    try:
        yield
    finally:
        enqueuer.after_enqueue = previous


def simulate_outage(
    target: Jobs | Any, *, calls: int | None = None, seconds: float | None = None
) -> SimulatedOutage:
    """Makes the in-memory store of `target` (a `Jobs` on `memory://`, or an app whose lifespan
    started one) fail as an unavailable database does: every call of the store raises
    `DatabaseUnavailableError` (so `enqueue`, `get`, a route's 503...), the worker's own calls
    included (it keeps its jobs and tries again), and the listeners that wake workers and
    waits are dropped (opened again once it ends). Every `Jobs` on the same `memory://name`
    meets the outage.

    It lasts for the next `calls` calls of the store (the worker's count too: without a worker,
    `calls=1` fails exactly the next call of your code), for `seconds`, or, with neither, until
    `end()`. Used as a context manager, it ends with the block at the latest.

    Raises:
        TypeError: `target` is not on the in-memory store: on PostgreSQL, make a real outage.
        ValueError: both `calls` and `seconds`, or a count or time that is not positive.

    Example:
        >>> with simulate_outage(jobs):
        ...     response = await client.post("/signup", json={"email": "ada@example.com"})
        >>> response.status_code
        503
    """
    jobs = _jobs_of(target)
    store = jobs._ready_store
    if not isinstance(store, MemoryStore):
        raise TypeError(
            f"simulate_outage needs a Jobs on the in-memory store (memory://); this one is on "
            f"{store.name}: stop its server, or ALTER DATABASE ... ALLOW_CONNECTIONS false"
        )
    return SimulatedOutage(store.data, calls, seconds)
