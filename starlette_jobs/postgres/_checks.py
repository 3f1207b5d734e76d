"""At start, by the driver's errors: a setting that cannot work (`ConfigurationError`: no such
database, host or role, a wrong password; a schema that the connections do not keep) told apart
from a server that is down for now (the store's `DatabaseUnavailableError`). `_startup.py`
decides what the start does with each."""

from __future__ import annotations

import logging
import re
import socket

from .._dsn import masked_dsn
from .._errors import ConfigurationError
from ..store._connectivity import CONNECT_TIMEOUT
from ._connections import answered_within, connect_plain
from ._driver_errors import (
    InvalidAuthorizationSpecificationError,
    InvalidCatalogNameError,
    InvalidParameterValueError,
    UndefinedObjectError,
    raise_as_store_error,
)
from ._schema import search_path_settings

logger = logging.getLogger("starlette_jobs")

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
    # The DSN's query passes settings to the server as the connection starts: one it does not
    # know (`?connect_timeout=`, which asyncpg does not read) or a value it refuses
    # (`?options=-c statement_timeout=x`) fails every connection the same way.
    if isinstance(error, UndefinedObjectError | InvalidParameterValueError):
        return ConfigurationError(
            f"PostgreSQL refused a setting of the DSN {shown}: {error}; fix or remove it"
        )
    # `sslmode=require` (or verify-ca, verify-full) where the server takes no TLS: every
    # connection fails the same way. asyncpg raises a plain ConnectionError for it, told by its
    # message alone; an outage never says this.
    if type(error) is ConnectionError and "rejected SSL upgrade" in str(error):
        return ConfigurationError(
            f"the server of {shown} takes no TLS connections, and the DSN's sslmode requires "
            "one: turn on ssl in the server, or set sslmode=prefer (or disable) in the DSN"
        )
    # asyncpg's ClientConfigurationError is a ValueError too; so is a port that is not a number,
    # and one past 65535 is the event loop's OverflowError.
    if isinstance(error, ValueError | OverflowError):
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


async def check_connection(dsn: str, source: str, schema: str | None = None) -> None:
    """Connects and closes, to find a mistake in the settings at start: once as configured,
    and with `schema`, once more with the schema's `search_path` (see `_check_schema_kept`).
    Warns when `schema` is on the connections' default `search_path` (`_on_path`): an app
    without `schema=` would share its tables, but not its channels or its migration lock.

    Raises:
        ConfigurationError: the settings cannot work (see `configuration_mistake`), or the
            connections do not keep the schema's `search_path`.
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
    try:
        # `public` keeps the default channels and migration lock: sharing it is no mistake.
        if schema is not None and schema != "public":
            row = await answered_within(
                connection,
                connection.fetchrow(
                    "SELECT current_setting('search_path') AS path, current_user AS role"
                ),
                CONNECT_TIMEOUT,
            )
            assert row is not None
            default_path, role = row["path"], row["role"]
            if schema in _on_path(default_path, role):
                logger.warning(
                    "schema %r is on the default search_path of these connections (%s, as %s): "
                    "an app on this database without schema= uses its tables too, with other "
                    "notification channels and another migration lock; give every app that "
                    "shares these tables the same schema=",
                    schema, default_path, role,
                )  # fmt: skip
        await connection.close(timeout=CONNECT_TIMEOUT)
    except Exception as error:
        connection.terminate()
        raise_as_store_error(error)
    if schema is not None:
        await _check_schema_kept(dsn, source, schema)


# One entry of a `search_path` setting: a quoted name ("" for a quote in it), or a plain one.
_PATH_ENTRY = re.compile(r'\s*(?:"((?:[^"]|"")*)"|([^,]*?))\s*(?:,|$)')


def _on_path(search_path: str, role: str) -> set[str]:
    """The schema names a `search_path` setting lists, as PostgreSQL reads them (a plain name
    in lower case), `"$user"` read as `role`."""
    names = set()
    for quoted, plain in _PATH_ENTRY.findall(search_path):
        name = quoted.replace('""', '"') if quoted else plain.lower()
        if name:
            names.add(role if name == "$user" else name)
    return names


async def _check_schema_kept(dsn: str, source: str, schema: str) -> None:
    """Raises `ConfigurationError` when a connection opened with the schema's `search_path`
    does not keep it: a connection pooler that drops startup settings (PgBouncer's
    `ignore_startup_parameters`) would put every statement in the server's default schema,
    beside another app's jobs, with no error."""
    settings = search_path_settings(schema)
    wanted = settings["search_path"]
    try:
        connection = await connect_plain(dsn, settings)
        try:
            kept = await answered_within(
                connection,
                connection.fetchval("SELECT current_setting('search_path')"),
                CONNECT_TIMEOUT,
            )
        finally:
            await connection.close(timeout=CONNECT_TIMEOUT)
    except Exception as error:
        raise_as_store_error(error, connecting=True)
    if kept != wanted:
        raise ConfigurationError(
            f"the connections to {masked_dsn(dsn)} ({source}) do not keep the search_path of "
            f"schema {schema!r}: asked for {wanted}, PostgreSQL answered {kept!r}. A connection "
            "pooler that drops startup parameters (PgBouncer's ignore_startup_parameters) "
            "would put the jobs in another schema; connect to PostgreSQL directly, or through "
            "a pooler that passes search_path on"
        )
