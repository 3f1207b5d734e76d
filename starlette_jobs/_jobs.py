"""`Jobs`: lifespan, enqueue, and the queries users run against their jobs (its settings are in
`_config.py`)."""

from __future__ import annotations

import asyncio
import builtins
import functools
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider

from ._bulk_actions import BulkActing
from ._config import DAY, JobsConfig
from ._draining import JobDraining
from ._dsn import masked_dsn
from ._enqueue import Enqueuer
from ._errors import (
    DatabaseUnavailableError,
    NotStartedError,
)
from ._job import NO_OPTIONS, ConfiguredJob, Job, JobId, _started, enqueue_one, registered_job
from ._metrics import Metrics
from ._queries import JobQueries
from ._queue import Queue
from ._queue_controls import QueueControlling
from ._schedule_queries import ScheduleQueries
from ._startup import (
    open_store,
    outage_reason,
    prepare_schema,
    prepare_when_reachable,
    resolve_dsn,
    worker_settings,
)
from ._throughput_queries import ThroughputQueries
from ._tracing import Tracing
from ._waiting import JobWaiting, OutcomeWaiters
from ._worker_queries import WorkerListing
from ._workflow_queries import WorkflowQueries
from .postgres._embedded import DEFAULT_DATA_DIR, release_embedded_postgres
from .store._protocol import Store
from .worker._shutdown import close_in_time
from .worker._worker import Worker

logger = logging.getLogger("starlette_jobs")


class Jobs(
    JobQueries,
    JobWaiting,
    JobDraining,
    ScheduleQueries,
    QueueControlling,
    WorkerListing,
    WorkflowQueries,
    BulkActing,
    ThroughputQueries,
):
    """Where jobs are stored, and which of them this process works on.

    Args:
        dsn: a PostgreSQL URL. Default: `DATABASE_URL`, else the embedded PostgreSQL (the
            `embedded` extra), whose data lives in `embedded_data_dir`.
        queues: queue name -> how many of its jobs may run at once in this process (1 to
            10,000), or a `Queue(concurrency=..., global_limit=...)` that also limits them
            across every worker (docs/limits.md). `queues={}` enqueues only and runs no worker.
        batch_size: the most jobs one claim takes from a queue (never more than free slots);
            1 to 10,000.
        poll_interval: seconds between claims when no notification arrives; > 0, at most 3,600.
        lease_duration: seconds a claimed job is reserved for this worker; renewed every third
            of it while the job runs. A job whose lease runs out is handed to another worker.
            > 0, at most 86,400 (a day).
        shutdown_grace: seconds running jobs get to finish at shutdown before they are
            released back to pending; 0 to 86,400.
        migrate: apply the schema migrations on start.
        embedded_data_dir: data directory of the embedded PostgreSQL.
        tracer_provider: OpenTelemetry tracer provider; default the global one.
        meter_provider: OpenTelemetry meter provider for the metrics (docs/metrics.md);
            default the global one. Without an SDK's, nothing is measured.
        pool_max_size: connections in the pool (1 to 1,000). Beside it, a process keeps up to
            six of its own: a worker four (LISTEN, claims, outcomes, leases), a process that
            enqueues one, and one that waits (`wait`, `result`) a second LISTEN.
        retention: seconds a finished (succeeded, failed or cancelled) job is kept; the workers
            delete older ones, with their events, as fast as jobs finish (docs/reliability.md).
            None keeps every job. Default: 7 days; at most 100 years.
        max_payload_bytes: the largest JSON payload `enqueue` accepts, in bytes (default 1 MiB,
            at most 64 MiB). Bigger arguments belong in your own storage, with a key in the job.
        events: record each change of a job's state as an event (`jobs.events`); False saves
            a row per change for the last bit of throughput (see docs/events.md).
        require_database: True: starting raises `DatabaseUnavailableError` when PostgreSQL
            cannot be reached. False (default): the app starts anyway, and warns about every 30 s
            until it answers; migrations and the worker start as soon as the database answers,
            and calls made meanwhile raise `DatabaseUnavailableError`. Either way, settings that
            cannot work (not a PostgreSQL URL, an unknown host, a missing database or role, a
            wrong password) make starting raise `ConfigurationError`.
        protect_event_loop: start fewer jobs while the event loop lags more than
            `loop_lag_target` seconds, so the app's requests stay quick (docs/workers.md). None
            (default): on under `jobs.lifespan` (a web app), off under `async with jobs:`.
        loop_lag_target: that lag, in seconds (default 0.001; > 0, at most 60).
        schema: the PostgreSQL schema that holds the tables and names the notification
            channels (created by the migrations), so that several apps share one database
            without seeing each other's jobs (docs/workers.md). A plain lower-case identifier.
            None (default): the connections' `search_path`, as before. With the memory store,
            a separate set of tables.
        unknown_job_grace: seconds a pending job that no live worker declares (its name is in
            no worker's code: during a rolling deploy, only the new code's) waits for one
            before a worker of its queue fails it with "no job named ... is registered"
            (docs/workers.md, "Rolling deploys"). Default 600; 0: no waiting, every worker
            claims every job and fails one it does not declare at once. At most 100 years.

    Raises:
        JobDefinitionError: a setting is out of its range, not finite (NaN, infinity), or of
            the wrong type (a bool where a number belongs, a number where a bool belongs).

    Example:
        >>> jobs = Jobs()
        >>> app = Starlette(routes=routes, lifespan=jobs.lifespan)
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        queues: Mapping[str, int | Queue] | None = None,
        batch_size: int = 100,
        poll_interval: float = 1.0,
        lease_duration: float = 30.0,
        shutdown_grace: float = 10.0,
        migrate: bool = True,
        embedded_data_dir: str | Path = DEFAULT_DATA_DIR,
        tracer_provider: TracerProvider | None = None,
        pool_max_size: int = 10,
        retention: float | None = 7 * DAY,
        max_payload_bytes: int = 1024 * 1024,
        require_database: bool = False,
        events: bool = True,
        protect_event_loop: bool | None = None,
        loop_lag_target: float = 0.001,
        schema: str | None = None,
        unknown_job_grace: float = 600.0,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        self.config = JobsConfig(
            dsn=dsn,
            queues=dict({"default": 10} if queues is None else queues),
            batch_size=batch_size,
            poll_interval=poll_interval,
            lease_duration=lease_duration,
            shutdown_grace=shutdown_grace,
            migrate=migrate,
            embedded_data_dir=Path(embedded_data_dir),
            tracer_provider=tracer_provider,
            pool_max_size=pool_max_size,
            retention=retention,
            max_payload_bytes=max_payload_bytes,
            require_database=require_database,
            events=events,
            protect_event_loop=protect_event_loop,
            loop_lag_target=loop_lag_target,
            schema=schema,
            unknown_job_grace=unknown_job_grace,
            meter_provider=meter_provider,
        )
        self._tracing = Tracing(tracer_provider)
        self._metrics = Metrics(meter_provider)
        self._store: Store | None = None
        self._worker: Worker | None = None
        self._dsn: str | None = None
        self._dsn_source = ""  # where the DSN came from, for error messages
        # The embedded PostgreSQL's data directory, while this instance uses that server.
        self._embedded: Path | None = None
        # Migrates and starts the worker once the database answers, when it did not at start.
        self._preparing: asyncio.Task[None] | None = None
        self._enqueuer: Enqueuer | None = None
        self._waiters: OutcomeWaiters | None = None  # `wait`'s listener and watches
        # Job attempts the last shutdown gave up on that still run (see `Worker.abandoned`).
        self._abandoned_attempts = 0
        self._in_lifespan = False  # a web app's: the event loop serves requests too

    def replace(self, **changes: Any) -> Jobs:
        """A new, unstarted `Jobs` with some settings changed (e.g. `queues=` for a worker)."""
        config = replace(self.config, **changes)
        return Jobs(**{name: getattr(config, name) for name in config.__dataclass_fields__})

    # -- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> Jobs:
        if self._store is not None:
            raise RuntimeError("this Jobs instance is already started")
        self._dsn, self._dsn_source, self._embedded = await resolve_dsn(
            self.config.dsn, self.config.embedded_data_dir
        )
        try:
            store = await open_store(self._dsn, self.config)
        except BaseException:
            await self._release_embedded()
            raise
        try:
            await self._prepare(store)
        except DatabaseUnavailableError as error:
            if self.config.require_database:
                await store.close()
                await self._release_embedded()
                raise DatabaseUnavailableError(
                    f"PostgreSQL is unreachable at start on {masked_dsn(self._dsn)} "
                    f"({outage_reason(error)}); "
                    "with require_database=False the app would start and keep trying"
                ) from error
            logger.warning(
                "PostgreSQL is unreachable at start on %s (%s); starting anyway, retrying in "
                "the background. Calls raise DatabaseUnavailableError until it answers",
                masked_dsn(self._dsn),
                outage_reason(error),
            )
            self._preparing = asyncio.create_task(
                prepare_when_reachable(functools.partial(self._prepare, store), error),
                name="starlette_jobs start",
            )
        except BaseException:
            await store.close()
            await self._release_embedded()
            raise
        self._store = store
        self._waiters = OutcomeWaiters(store)
        self._enqueuer = Enqueuer(
            lambda: self._ready_store, self._tracing, self.config.max_payload_bytes, self._metrics
        )
        _started.append(self._enqueuer)
        return self

    async def _prepare(self, store: Store) -> None:
        """Brings the schema up to date (see `_startup.prepare_schema`), then starts the worker."""
        await prepare_schema(store, self.config, self._dsn_source)
        if self.config.queues:
            worker = Worker(
                store,
                worker_settings(self.config, self._in_lifespan),
                self._tracing,
                self._metrics,
            )
            await worker.start()
            self._worker = worker

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if self._preparing is not None:
                self._preparing.cancel()
                await asyncio.gather(self._preparing, return_exceptions=True)
                self._preparing = None
            if self._worker is not None:
                # Still registered meanwhile: a job finishing in the grace period may enqueue.
                await self._worker.stop()
                self._abandoned_attempts = self._worker.abandoned
        finally:
            if self._enqueuer in _started:
                _started.remove(self._enqueuer)
            self._enqueuer = None
            self._worker = None
            if self._waiters is not None:
                waiters, self._waiters = self._waiters, None
                await close_in_time(waiters)
            if self._store is not None:
                store, self._store = self._store, None
                await close_in_time(store)
            await self._release_embedded()

    async def _release_embedded(self) -> None:
        """Stops using the embedded PostgreSQL, which stops when its last user does."""
        if self._embedded is not None:
            data_dir, self._embedded = self._embedded, None
            await asyncio.to_thread(release_embedded_postgres, data_dir)

    @asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[dict[str, Any]]:
        """Starlette lifespan: `Starlette(lifespan=jobs.lifespan)`, or nested in your own with
        `async with jobs.lifespan(app):`. Sets `app.state.jobs` and yields `{"jobs": jobs}`."""
        self._in_lifespan = True
        try:
            async with self:
                app.state.jobs = self
                yield {"jobs": self}
        finally:
            self._in_lifespan = False

    @property
    def _ready_store(self) -> Store:
        if self._store is None:
            raise NotStartedError(
                "Jobs is not started: use `async with jobs:` or `Starlette(lifespan=jobs.lifespan)`"
            )
        if self._preparing is not None and not self._preparing.done():
            raise DatabaseUnavailableError(
                "PostgreSQL has not been reachable since start; migrations and the worker start "
                "as soon as it answers"
            )
        return self._store

    @property
    def _ready_waiters(self) -> OutcomeWaiters:
        self._ready_store  # noqa: B018 - raises NotStartedError
        if self._waiters is None:
            raise NotStartedError("Jobs is stopping: no more waiting for jobs")
        return self._waiters

    @property
    def _ready_enqueuer(self) -> Enqueuer:
        """What writes this instance's jobs (for `ConfiguredJob`)."""
        if self._enqueuer is None:
            self._ready_store  # noqa: B018 - raises NotStartedError
        assert self._enqueuer is not None
        return self._enqueuer

    @property
    def dsn(self) -> str | None:
        """The DSN in use once started (the embedded server's, when that is what runs)."""
        return self._dsn

    @property
    def worker_id(self) -> str | None:
        """This process's worker id, as stored in the rows it claims; None without a worker."""
        return None if self._worker is None else self._worker.worker_id

    # -- enqueue ------------------------------------------------------------------------------

    async def enqueue(self, job: Job[..., Any] | str, /, *args: Any, **kwargs: Any) -> JobId:
        """Enqueue `job` (a `@job` function, or its registered name) through this instance.

        Example:
            >>> job_id = await jobs.enqueue(send_welcome, user_id=42, email="ada@example.com")
        """
        return await enqueue_one(_declared(job), args, kwargs, NO_OPTIONS, self)

    async def enqueue_many(
        self, job: Job[..., Any] | str, items: Iterable[Mapping[str, Any]], /
    ) -> builtins.list[JobId]:
        """Enqueue one job per mapping of keyword arguments, in one round trip; all are
        validated first, and one invalid item refuses the whole batch."""
        return await ConfiguredJob(_declared(job), NO_OPTIONS, self).enqueue_many(items)


def _declared(job: Job[..., Any] | str) -> Job[..., Any]:
    """A `@job` function given as itself or by its registered name."""
    return registered_job(job) if isinstance(job, str) else job
