"""At start, by the driver's errors: a setting that cannot work (`ConfigurationError`: no such
database, host or role, a wrong password) told apart from a server that is down for now (the
store's `DatabaseUnavailableError`). `_startup.py` decides what the start does with each."""

from __future__ import annotations

import re
import socket

from .._dsn import masked_dsn
from .._errors import ConfigurationError
from ._connections import connect_plain
from ._driver_errors import (
    InvalidAuthorizationSpecificationError,
    InvalidCatalogNameError,
    raise_as_store_error,
)

EXPECTED_DSN = "expected postgresql://user:password@host:port/database"


# getaddrinfo's answers that mean "this name does not exist", as opposed to "the resolver could
# not answer now" (EAI_AGAIN), which is an outage. EAI_NODATA is not defined on every platform.
_NO_SUCH_HOST = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}


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
        return ConfigurationError(f"invalid DSN {shown}: {error}; {EXPECTED_DSN}")
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
        DatabaseUnavailableError: an outage (see `_driver_errors.unavailable`).
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
