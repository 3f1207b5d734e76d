"""At start: the DSN resolved and its store opened (`open_store`), the schema prepared
(`prepare_schema`), and a database setting that cannot work told apart from a server that is
down for now.

A mistake in the settings (not a PostgreSQL URL, an unknown host, a missing database or role, a
wrong password) is not fixed by waiting, so it stops the start with `ConfigurationError`. An
outage (connection refused, a timeout, a server starting up or shutting down) may end any
moment: the app starts anyway, `prepare_when_reachable` tries again in the background, and
`OutageReport` keeps saying so while it lasts.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from ._config import JobsConfig
from ._dsn import masked_dsn
from ._errors import ConfigurationError, DatabaseUnavailableError
from ._queue import declared_queues
from .memory._store import is_memory_dsn, memory_store
from .postgres._checks import EXPECTED_DSN, check_connection
from .postgres._embedded import start_embedded_postgres
from .postgres._store import PostgresStore
from .store._connectivity import Backoff, worker_statement_timeout
from .store._protocol import Store
from .worker._settings import WorkerSettings

logger = logging.getLogger("starlette_jobs")

# Seconds between two warnings that PostgreSQL is still unreachable since start.
REPORT_EVERY = 30.0


async def resolve_dsn(given: str | None, embedded_data_dir: Path) -> tuple[str, str, Path | None]:
    """The DSN to use (`given`, else `DATABASE_URL`, else the embedded server's, started now),
    checked to be a PostgreSQL URL; where it came from, for error messages; and the embedded
    server's data directory when that is the one in use."""
    configured = configured_dsn(given)
    if configured is None:
        dsn = await asyncio.to_thread(start_embedded_postgres, embedded_data_dir)
        return dsn, "the embedded PostgreSQL", embedded_data_dir
    dsn, source = configured
    if is_memory_dsn(dsn):
        return dsn, "the in-memory store", None
    check_dsn(dsn, source)
    return dsn, source, None


def configured_dsn(given: str | None) -> tuple[str, str] | None:
    """The DSN set for `Jobs`, `given` else `DATABASE_URL`'s, and where it came from; None when
    neither is set (the embedded PostgreSQL is used then)."""
    if given:
        return given, "from the dsn argument"
    from_environment = os.environ.get("DATABASE_URL")
    return (from_environment, "from DATABASE_URL") if from_environment else None


def check_dsn(dsn: str, source: str) -> None:
    """Refuses a DSN that is not a PostgreSQL URL, before anything tries to connect with it.

    asyncpg would take `postgres:/app` (no `//`) for a database on localhost, and reports other
    schemes as a connection failure, which the start would mistake for an outage.

    Raises:
        ConfigurationError: `dsn` is not a `postgresql://` or `postgres://` URL.
    """
    scheme, separator, _ = dsn.partition("://")
    if not separator or scheme.lower() not in ("postgresql", "postgres"):
        raise ConfigurationError(
            f"not a PostgreSQL URL: {masked_dsn(dsn)!r} ({source}); {EXPECTED_DSN}"
        )


class OutageReport:
    """Says that PostgreSQL is still unreachable, every `REPORT_EVERY` seconds while it lasts
    (and at once when the reason changes), and when it answers: one warning at start and then
    silence would look like a working app."""

    def __init__(self, first: BaseException) -> None:
        self._began = time.monotonic()
        self._next = self._began + REPORT_EVERY
        self._last = outage_reason(first)  # the start already said this one

    def failed(self, error: BaseException) -> None:
        now = time.monotonic()
        reason = outage_reason(error)
        if now < self._next and reason == self._last:
            return
        self._next, self._last = now + REPORT_EVERY, reason
        if isinstance(error, ConfigurationError):
            # The server answers now, but the settings cannot work: an operator must act.
            logger.error("PostgreSQL answers but refuses to start: %s; retrying", error)
        else:
            logger.warning(
                "PostgreSQL still unreachable after %.0f s: %s; retrying, and calls raise "
                "DatabaseUnavailableError until it answers",
                now - self._began,
                reason,
            )

    def ended(self) -> None:
        logger.info("PostgreSQL is reachable after %.0f s: started", time.monotonic() - self._began)


def outage_reason(error: BaseException) -> str:
    """What made the database unavailable, for a log line: the driver's error that a
    `DatabaseUnavailableError` stands for, when there is one."""
    if isinstance(error, DatabaseUnavailableError) and error.__cause__ is not None:
        error = error.__cause__
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


async def open_store(dsn: str, config: JobsConfig) -> Store:
    """The store `dsn` names, opened without reaching the server: `prepare_schema` is its
    first use."""
    store: Store = (
        memory_store(dsn, config.schema)
        if is_memory_dsn(dsn)
        else await PostgresStore.open(
            dsn,
            min_size=0,
            max_size=config.pool_max_size,
            worker_statement_timeout=worker_statement_timeout(config.lease_duration),
            schema=config.schema,
        )
    )
    store.record_events = config.events
    return store


async def prepare_schema(store: Store, config: JobsConfig, dsn_source: str) -> None:
    """Applies the migrations (or, with `migrate=False`, checks the schema).

    Raises:
        ConfigurationError: the database settings cannot work (see `postgres/_checks.py`).
        DatabaseUnavailableError: the database is unavailable for now.
    """
    # One connection of its own first: its errors are the ones that tell a mistake in the
    # settings from an outage, whatever the steps below would connect with.
    if isinstance(store, PostgresStore):
        await check_connection(store.dsn, dsn_source, store.schema)
    if config.migrate:
        applied = await store.migrate()
        if applied:
            logger.info("applied migrations: %s", ", ".join(applied))
    else:
        # A worker on a schema it does not know would fail every claim, forever.
        await store.check_schema(complete=bool(config.queues))


async def prepare_when_reachable(
    prepare: Callable[[], Awaitable[None]], first: BaseException
) -> None:
    """Calls `prepare` until it succeeds, backing off, and says how the outage goes
    (`OutageReport`): the start of an app whose database was unavailable."""
    backoff = Backoff()
    report = OutageReport(first)
    while True:
        await backoff.wait()
        try:
            await prepare()
        except DatabaseUnavailableError as error:
            report.failed(error)
            continue
        except ConfigurationError as error:  # the server is back, but not with this database
            report.failed(error)
            continue
        except Exception:
            logger.exception("starting on the database failed; retrying")
            continue
        report.ended()
        return


def worker_settings(config: JobsConfig, in_lifespan: bool) -> WorkerSettings:
    """What the worker of `Jobs(config)` is told; the loop-lag guard is on by default only in
    an app's lifespan, where a web tier shares the event loop."""
    c = config
    protect = in_lifespan if c.protect_event_loop is None else c.protect_event_loop
    declared = declared_queues(c.queues)
    return WorkerSettings(
        {name: queue.concurrency for name, queue in declared.items()}, c.batch_size,
        c.poll_interval, c.lease_duration, c.shutdown_grace, c.retention,
        c.loop_lag_target if protect else None,
        limits={name: queue.limits for name, queue in declared.items()},
        unknown_job_grace=c.unknown_job_grace,
        max_payload_bytes=c.max_payload_bytes,
    )  # fmt: skip
