"""What the driver's (asyncpg's) errors mean: the connection is lost, got no answer, or the
statement never left; and the one rule that decides which of them mean "the database is
unavailable": `unavailable`, which the PostgreSQL store applies at its boundary
(`raise_as_store_error`), so that nothing past it sees the driver's exceptions.
"""

from __future__ import annotations

from typing import NoReturn

import asyncpg

from .._errors import (
    ConfigurationError,
    DatabaseTooSlowError,
    DatabaseUnavailableError,
    SchemaVersionError,
)
from ._schema import described, lacks_tables

# The driver's errors that the store turns into the library's meaning.
UniqueViolationError = asyncpg.UniqueViolationError
UndefinedTableError = asyncpg.UndefinedTableError
LockNotAvailableError = asyncpg.exceptions.LockNotAvailableError
InvalidCatalogNameError = asyncpg.InvalidCatalogNameError
InvalidAuthorizationSpecificationError = asyncpg.InvalidAuthorizationSpecificationError
UndefinedObjectError = asyncpg.exceptions.UndefinedObjectError
InvalidParameterValueError = asyncpg.exceptions.InvalidParameterValueError
PostgresError = asyncpg.PostgresError

# The connection is gone: the server dropped it, or the network did.
CONNECTION_LOST: tuple[type[BaseException], ...] = (
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    # A server that ends an idle connection (pg_terminate_backend, a restart, an idle timeout)
    # says so before it closes the socket; asyncpg leaves such a connection in an error state,
    # and it fails its next statement with this, until the closing is read.
    asyncpg.InternalClientError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
)
# The server is there but did not do the work in time: the statement ran past the server's
# statement_timeout (blocked by a lock, or too large), or a lock could not be had.
TOO_SLOW: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.QueryCanceledError,
    asyncpg.exceptions.LockNotAvailableError,
)
# The server aborted the statement for what another transaction did at the same moment (a
# deadlock, say between an operator cancelling a workflow and a worker finishing one of its
# steps): nothing of it was written, and the same statement may go through at once.
CONFLICT: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.DeadlockDetectedError,
    asyncpg.exceptions.SerializationError,
)
# What makes a call fail for want of the database rather than for what it asked: raised as
# `DatabaseUnavailableError` to callers; the worker keeps what it has and tries again.
DATABASE_ERRORS: tuple[type[BaseException], ...] = (
    *CONNECTION_LOST,
    *TOO_SLOW,
    *CONFLICT,
    TimeoutError,  # no answer in time: the network went silent, or the server hangs
    # Out of connections (old and new processes of a deploy), disk, memory: the server is
    # there but cannot do the work now (SQLSTATE class 53, "insufficient resources").
    asyncpg.exceptions.InsufficientResourcesError,
    # Writes refused: a standby reached after a failover, before the DSN points at the new
    # primary, or a database an operator made read-only for a while.
    asyncpg.exceptions.ReadOnlySQLTransactionError,
)
# What the statements name is not there: the schema was never migrated, or was by an older
# release than this code (a mistyped `schema=`, a process started with `migrate=False` before
# `starlette-jobs migrate` ran). Raised as `SchemaVersionError`, which says what to do.
NOT_MIGRATED: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.UndefinedTableError,
    asyncpg.exceptions.UndefinedColumnError,
    asyncpg.exceptions.UndefinedFunctionError,
)
# The role may not use the schema or its tables: made by an administrator without a grant to
# this role (without USAGE, PostgreSQL does not even see the schema on the search_path: "no
# schema has been selected to create in"). Raised as `ConfigurationError`: waiting won't help.
NOT_PERMITTED: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.InsufficientPrivilegeError,
    asyncpg.exceptions.InvalidSchemaNameError,
)
# On the caller's own connection (an enqueue in the caller's transaction), what these say is of
# the caller's transaction or search_path, not of the store: a read-only transaction of theirs,
# tables their search_path does not reach. Theirs to see as they are.
CALLERS_OWN: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.ReadOnlySQLTransactionError,
    *NOT_MIGRATED,
)
# A server that is there refusing a new connection, for now: the database does not take
# connections (ALLOW_CONNECTIONS false, during maintenance). PostgreSQL also raises this
# SQLSTATE (55000) for statements, where it means no outage: read so only when connecting.
REFUSED_CONNECTION: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.ObjectNotInPrerequisiteStateError,
)
# A lock not granted within the statement's `lock_timeout` (a worker's liveness lock, taken over
# from its stale session: `_registry.WorkerRegistry.hold_liveness`).
LOCK_NOT_AVAILABLE: tuple[type[BaseException], ...] = (asyncpg.exceptions.LockNotAvailableError,)
_REFUSING: tuple[type[BaseException], ...] = (
    *REFUSED_CONNECTION,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.CannotConnectNowError,  # starting up, shutting down, in recovery
)


def unavailable(
    error: BaseException, *, connecting: bool = False
) -> DatabaseUnavailableError | None:
    """The library's error for `error` if it means that the database is unavailable (one of
    `DATABASE_ERRORS`; `connecting`: raised while opening a connection, `REFUSED_CONNECTION`
    too), chained to it; None for any other error, which is the caller's to see as it is.

    The one place that decides it: the stores raise `DatabaseUnavailableError` (the too slow
    kind: `DatabaseTooSlowError`), and the rest of the library catches only that.
    """
    if (
        isinstance(error, DatabaseUnavailableError)
        or _misused_connection(error)
        or not (
            isinstance(error, DATABASE_ERRORS)
            or (connecting and isinstance(error, REFUSED_CONNECTION))
        )
    ):
        return None
    detail = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    translated: DatabaseUnavailableError
    if isinstance(error, TOO_SLOW):
        translated = DatabaseTooSlowError(
            "a statement ran out of time: PostgreSQL did not finish it in time (a lock held "
            f"elsewhere, or too much) ({detail})"
        )
    elif isinstance(error, CONFLICT):
        translated = DatabaseUnavailableError(
            "PostgreSQL aborted the statement for a conflict with another transaction; "
            f"nothing of it was written, and it may go through if tried again ({detail})"
        )
    elif isinstance(error, _REFUSING):
        translated = DatabaseUnavailableError(
            f"PostgreSQL is unreachable for now: it refuses new connections ({detail})"
        )
    elif isinstance(error, asyncpg.exceptions.ReadOnlySQLTransactionError):
        translated = DatabaseUnavailableError(
            "PostgreSQL takes no writes for now: a read-only database, or a standby reached "
            f"after a failover ({detail})"
        )
    elif isinstance(error, asyncpg.exceptions.InsufficientResourcesError):
        translated = DatabaseUnavailableError(
            f"PostgreSQL lacks the resources to do it now: connections, disk or memory ({detail})"
        )
    else:
        translated = DatabaseUnavailableError(
            f"PostgreSQL is unreachable or stopped answering ({detail})"
        )
    translated.__cause__ = error
    return translated


def _misused_connection(error: BaseException) -> bool:
    """Whether the driver refused a statement because another one runs on the same connection:
    never the database's doing. The store's own connections run one statement at a time; a
    caller's (`connection=`) used by two at once is a mistake in the calling code, which waiting
    and trying again would not fix. asyncpg says so by an `InterfaceError` and this message."""
    return isinstance(error, asyncpg.InterfaceError) and "another operation is in progress" in str(
        error
    )


def not_migrated(error: BaseException, schema: str | None = None) -> SchemaVersionError | None:
    """The library's error for `error` if it says that what a statement names is not in the
    database (`NOT_MIGRATED`), naming `schema` (None: the connections' search_path); None for
    any other error."""
    if not isinstance(error, NOT_MIGRATED):
        return None
    translated = SchemaVersionError(
        lacks_tables(schema, f"the tables of this release of starlette-jobs ({error})")
    )
    translated.__cause__ = error
    return translated


def not_permitted(error: BaseException, schema: str | None = None) -> ConfigurationError | None:
    """The library's error for `error` if it says that the role may not use `schema` (None:
    the connections' search_path) or its tables (`NOT_PERMITTED`); None for any other error."""
    if not isinstance(error, NOT_PERMITTED):
        return None
    grant = "" if schema is None else f" (GRANT USAGE, CREATE ON SCHEMA {schema} TO ...)"
    translated = ConfigurationError(
        f"PostgreSQL does not let this role use {described(schema)} ({error}): GRANT it "
        f"USAGE on the schema, CREATE too for the migrations{grant}, and the rights on the "
        "tables if another role migrated them; or run the migrations as a role that may"
    )
    translated.__cause__ = error
    return translated


def raise_as_store_error(
    error: BaseException, *, connecting: bool = False, schema: str | None = None
) -> NoReturn:
    """Raises `error` as the store's callers see it: the library's error (see `unavailable`,
    `not_migrated` and `not_permitted`, whose messages name `schema`), or `error` itself. For
    an `except` clause at the store's boundary."""
    translated = (
        unavailable(error, connecting=connecting)
        or not_migrated(error, schema)
        or not_permitted(error, schema)
    )
    if translated is None:
        if isinstance(error, _UNSTORABLE_TEXT):
            # A NUL character, say, in text that reached a statement unchecked: the caller's
            # mistake, told in the same words on both stores' side of the boundary.
            raise ValueError(f"PostgreSQL cannot take this text: {error}") from error
        raise error
    raise translated from error


_UNSTORABLE_TEXT = (asyncpg.CharacterNotInRepertoireError, asyncpg.UntranslatableCharacterError)


def connection_lost(error: BaseException) -> bool:
    """Whether `error` says the connection is gone (the server dropped it, or the network did),
    rather than that a statement ran out of time on a connection that may still be good."""
    # TimeoutError is an OSError: exclude it by name; so is our own DatabaseUnavailableError
    # (a new connection refused: the open ones may be fine).
    return isinstance(error, CONNECTION_LOST) and not isinstance(
        error, (TimeoutError, DatabaseUnavailableError)
    )


def no_answer(error: BaseException) -> bool:
    """Whether the connection is gone or did not answer at all: it, and likely every other
    connection of the process, should be replaced."""
    return isinstance(error, (*CONNECTION_LOST, TimeoutError)) and not isinstance(
        error, DatabaseUnavailableError
    )


def never_sent(error: BaseException) -> bool:
    """Whether the statement failed before anything of it reached the server, so that running
    it again on a new connection cannot run it twice: asyncpg refuses to start it on a
    connection that the server already said it would end."""
    return isinstance(error, asyncpg.InternalClientError) and "cannot switch to state" in str(error)
