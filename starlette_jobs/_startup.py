"""At start: a database setting that cannot work, told apart from a server that is down for now.

A mistake in the settings (not a PostgreSQL URL, an unknown host, a missing database or role, a
wrong password) is not fixed by waiting, so it stops the start with `ConfigurationError`. An
outage (connection refused, a timeout, a server starting up or shutting down) may end any
moment: the app starts anyway, and `OutageReport` keeps saying so while it lasts.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path

from ._dsn import masked_dsn
from ._errors import ConfigurationError, DatabaseUnavailableError
from .memory._store import is_memory_dsn
from .postgres._checks import EXPECTED_DSN
from .postgres._embedded import start_embedded_postgres

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
