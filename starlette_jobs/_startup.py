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
import re
import socket
import time
from pathlib import Path

from ._connections import (
    InvalidAuthorizationSpecificationError,
    InvalidCatalogNameError,
    connect_plain,
    raise_as_store_error,
)
from ._dsn import masked_dsn
from ._embedded import start_embedded_postgres
from ._errors import ConfigurationError, DatabaseUnavailableError
from ._memory import is_memory_dsn

logger = logging.getLogger("starlette_jobs")

# Seconds between two warnings that PostgreSQL is still unreachable since start.
REPORT_EVERY = 30.0

_EXPECTED = "expected postgresql://user:password@host:port/database"
# getaddrinfo's answers that mean "this name does not exist", as opposed to "the resolver could
# not answer now" (EAI_AGAIN), which is an outage. EAI_NODATA is not defined on every platform.
_NO_SUCH_HOST = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}


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
            f"not a PostgreSQL URL: {masked_dsn(dsn)!r} ({source}); {_EXPECTED}"
        )


def configuration_mistake(error: BaseException, dsn: str, source: str) -> ConfigurationError | None:
    """The `ConfigurationError` that `error`, raised while connecting, stands for; None when
    it is an outage or any other failure."""
    shown = f"{masked_dsn(dsn)} ({source})"
    if isinstance(error, InvalidCatalogNameError):
        database = _quoted_name(error) or "the database"
        return ConfigurationError(
            f"{error} on {shown}: create it (CREATE DATABASE {database}) or fix the database "
            "name in the DSN"
        )
    # A wrong password (InvalidPasswordError), a missing role, a role that may not log in, and
    # a login that pg_hba.conf does not let in from this host or without TLS.
    if isinstance(error, InvalidAuthorizationSpecificationError):
        also = " (or the server's pg_hba.conf)" if "pg_hba.conf" in str(error) else ""
        return ConfigurationError(
            f"PostgreSQL refused the login on {shown}: {error}; check the user name and "
            f"password in the DSN{also}"
        )
    if isinstance(error, socket.gaierror) and error.errno in _NO_SUCH_HOST:
        host = _host(dsn)
        return ConfigurationError(
            f"unknown host {host!r} in {shown} ({error.strerror}); check the host name"
        )
    # asyncpg's ClientConfigurationError is a ValueError too; so is a port that is not a number.
    if isinstance(error, ValueError):
        return ConfigurationError(f"invalid DSN {shown}: {error}; {_EXPECTED}")
    return None


def _quoted_name(error: BaseException) -> str | None:
    """`name` from a server message such as `database "name" does not exist`."""
    found = re.search(r'"([^"]+)"', str(error))
    return None if found is None else found[1]


def _host(dsn: str) -> str:
    netloc = dsn.partition("://")[2]
    netloc = re.split(r"[/?#]", netloc, maxsplit=1)[0].rpartition("@")[2]
    return netloc.rsplit(":", 1)[0] if netloc.count(":") == 1 else netloc


async def check_connection(dsn: str, source: str) -> None:
    """Connects once and closes, to find a mistake in the settings at start.

    Raises:
        ConfigurationError: the settings cannot work (see `configuration_mistake`).
        DatabaseUnavailableError: an outage (see `_connections.unavailable`).
        Exception: any other error, the driver's own.
    """
    try:
        connection = await connect_plain(dsn)
    except Exception as error:
        mistake = configuration_mistake(error, dsn, source)
        if mistake is not None:
            # The message says it all. Chained, the driver's traceback (40 lines for a DNS
            # failure) would bury it where the whole chain is printed, as uvicorn does when
            # the app fails to start; it stays at hand as `__context__`.
            raise mistake from None
        raise_as_store_error(error, connecting=True)
    await connection.close()


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
