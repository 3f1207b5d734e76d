"""The helpers for a test that enqueued something: run what was enqueued, check that a job was,
run jobs as they are enqueued (`eager`), and simulate an outage of the in-memory store."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .._job import Job, registered_jobs
from .._jobs import Jobs
from .._queue import declared_queues
from .._records import JobRecord, JobStatus
from ..memory._jsonb import booleans_apart
from ..memory._outage import SimulatedOutage
from ..memory._store import MemoryStore
from ..worker._settings import DEFAULT_RETRY_WAIT, WorkerSettings, check_drain_durations
from ..worker._worker import Worker

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
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    served: set[str] = set()
    token = _running_enqueued.set(True)
    try:
        # The queues of the jobs declared and pending; again after each drain: a job may have
        # enqueued another into a queue only its `configure(queue=...)` names.
        while not (queues := await _queues_to_serve(jobs)) <= served:
            served |= queues
            await _drain(jobs, served, max(0.0, deadline - loop.time()), retry_wait)
    finally:
        _running_enqueued.reset(token)


async def _queues_to_serve(jobs: Jobs) -> set[str]:
    pending = await jobs._ready_store.list_jobs(JobStatus.PENDING, None, 10_000)
    queues = {job.queue for job in registered_jobs()} | set(jobs.config.queues)
    return queues | {record.queue for record in pending}


async def _drain(jobs: Jobs, queues: set[str], timeout: float, retry_wait: float) -> None:
    """A worker of `queues` on `jobs`' store, until none of their jobs is due."""
    config = jobs.config
    declared = declared_queues(config.queues)
    concurrency = max((queue.concurrency for queue in declared.values()), default=10)
    settings = WorkerSettings(
        queues=dict.fromkeys(sorted(queues), concurrency),
        batch_size=config.batch_size,
        poll_interval=min(config.poll_interval, 0.1),
        lease_duration=config.lease_duration,
        shutdown_grace=config.shutdown_grace,
        retention=None,
        limits={name: queue.limits for name, queue in declared.items()},
        unknown_job_grace=config.unknown_job_grace,
    )
    worker = Worker(jobs._ready_store, settings, jobs._tracing)
    await worker.start()
    try:
        await worker.drain(timeout, include_scheduled=False, retry_wait=retry_wait)
    finally:
        await worker.stop()


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
        # `True` is not `1` (the store tells them apart: a key reused so is another job's).
        if booleans_apart(record.arguments) == booleans_apart(expected):
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
    `end()`. Used as a context manager, it ends with the block at the latest. A store has one
    outage at a time: a new one replaces the one in progress, which does not resume after it.

    Raises:
        TypeError: `target` is not on the in-memory store: on PostgreSQL, make a real outage.
        ValueError: both `calls` and `seconds`, or a count or time that is not positive.

    Example (an app with `database_unavailable_handler` installed; without it, a 500):
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
