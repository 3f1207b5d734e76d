"""How the driver's errors are classified (`_driver_errors`): what is a lost connection, what got
no answer, what never reached the server, and which mean that the database is unavailable (the
library's error, which is all the store's callers see)."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from starlette_jobs import ConfigurationError, DatabaseUnavailableError
from starlette_jobs._errors import DatabaseTooSlowError, SchemaVersionError
from starlette_jobs.postgres._driver_errors import (
    connection_lost,
    never_sent,
    no_answer,
    raise_as_store_error,
    unavailable,
)

REFUSED_BEFORE_SENDING = asyncpg.InternalClientError(
    "cannot switch to state 12; another operation (2) is in progress"
)


@pytest.mark.parametrize(
    ("error", "lost", "unanswered", "unsent"),
    [
        (ConnectionResetError(), True, True, False),
        (asyncpg.ConnectionDoesNotExistError("closed in the middle"), True, True, False),
        (REFUSED_BEFORE_SENDING, True, True, True),
        # A TimeoutError is an OSError, yet the connection may be fine: not "lost".
        (TimeoutError(), False, True, False),
        (asyncpg.QueryCanceledError("canceling statement due to statement timeout"), *[False] * 3),
        (asyncpg.UniqueViolationError("duplicate key"), False, False, False),
        (ValueError("not the database"), False, False, False),
    ],
)
def test_errors_are_classified(
    error: BaseException, lost: bool, unanswered: bool, unsent: bool
) -> None:
    assert (connection_lost(error), no_answer(error), never_sent(error)) == (
        lost,
        unanswered,
        unsent,
    )


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (TimeoutError(), "unreachable or stopped answering"),
        (ConnectionRefusedError(111, "Connection refused"), "unreachable or stopped answering"),
        (asyncpg.ConnectionDoesNotExistError("closed in the middle"), "stopped answering"),
        (asyncpg.TooManyConnectionsError("sorry, too many clients"), "refuses new connections"),
        (asyncpg.CannotConnectNowError("the database system is starting up"), "refuses new"),
        (asyncpg.QueryCanceledError("canceling statement"), "did not finish it in time"),
        (asyncpg.LockNotAvailableError("could not obtain lock"), "did not finish it in time"),
        (asyncpg.DeadlockDetectedError("deadlock detected"), "conflict with another transaction"),
        (asyncpg.ReadOnlySQLTransactionError("cannot execute INSERT"), "takes no writes"),
        (asyncpg.DiskFullError("could not extend file"), "connections, disk or memory"),
        (asyncpg.SerializationError("could not serialize access"), "conflict with another"),
    ],
)
def test_what_means_the_database_is_unavailable_is_raised_as_the_librarys_error(
    error: BaseException, says: str
) -> None:
    with pytest.raises(DatabaseUnavailableError, match=says) as raised:
        raise_as_store_error(error)
    assert raised.value.__cause__ is error  # the driver's error, for the log's traceback
    assert type(error).__name__ in str(raised.value)
    too_slow = isinstance(error, asyncpg.QueryCanceledError | asyncpg.LockNotAvailableError)
    assert isinstance(raised.value, DatabaseTooSlowError) is too_slow


NOT_ACCEPTING = asyncpg.ObjectNotInPrerequisiteStateError(
    'database "app" is not currently accepting connections'
)


def test_a_database_that_takes_no_connections_is_unavailable_to_a_new_one_only() -> None:
    """ALLOW_CONNECTIONS false: SQLSTATE 55000, which a statement may raise for other reasons
    (no outage then: the caller's to see as it is)."""
    with pytest.raises(DatabaseUnavailableError, match="refuses new connections"):
        raise_as_store_error(NOT_ACCEPTING, connecting=True)
    with pytest.raises(asyncpg.ObjectNotInPrerequisiteStateError):
        raise_as_store_error(NOT_ACCEPTING)


@pytest.mark.parametrize(
    "error",
    [
        ValueError("mine"),
        asyncpg.UniqueViolationError("duplicate key"),
        DatabaseUnavailableError("said already"),
        # A connection of the caller's (`connection=`) used by two statements at once: a
        # mistake in the calling code, which waiting and trying again cannot fix.
        asyncpg.InterfaceError("cannot perform operation: another operation is in progress"),
    ],
)
def test_other_errors_pass_through_as_they_are(error: BaseException) -> None:
    with pytest.raises(type(error)) as raised:
        raise_as_store_error(error, connecting=True)
    assert raised.value is error
    assert unavailable(error) is None


def test_the_librarys_own_error_is_no_lost_connection_though_it_is_an_oserror() -> None:
    """A new connection refused says nothing of the open ones: they are not all replaced."""
    refused = unavailable(NOT_ACCEPTING, connecting=True)
    assert isinstance(refused, OSError)
    assert (connection_lost(refused), no_answer(refused)) == (False, False)


async def test_text_postgres_cannot_take_is_a_value_error_not_the_drivers(
    connection: asyncpg.Connection[Any],
) -> None:
    """A statement given a NUL character that no check stopped: the caller's mistake, said
    in the library's words at the store's boundary."""
    with pytest.raises(asyncpg.CharacterNotInRepertoireError) as raw:
        await connection.fetchval("SELECT $1::text", "a\x00b")
    with pytest.raises(ValueError, match="PostgreSQL cannot take this text") as raised:
        raise_as_store_error(raw.value)
    assert raised.value.__cause__ is raw.value


@pytest.mark.parametrize(
    "error",
    [
        asyncpg.UndefinedTableError('relation "starlette_jobs" does not exist'),
        asyncpg.UndefinedColumnError('column "settled" does not exist'),
        asyncpg.UndefinedFunctionError("function starlette_jobs_tick() does not exist"),
    ],
)
def test_what_the_statements_name_missing_is_a_schema_to_migrate(error: BaseException) -> None:
    with pytest.raises(SchemaVersionError) as raised:
        raise_as_store_error(error, schema="billing")
    assert str(raised.value).startswith("schema 'billing' lacks the tables of this release")
    assert "`starlette-jobs migrate --schema billing`" in str(raised.value)
    assert raised.value.__cause__ is error
    with pytest.raises(
        SchemaVersionError, match=r"^the database lacks .* `starlette-jobs migrate`"
    ):
        raise_as_store_error(error)


@pytest.mark.parametrize(
    "error",
    [
        asyncpg.InsufficientPrivilegeError("permission denied for schema billing"),
        asyncpg.InvalidSchemaNameError("no schema has been selected to create in"),
    ],
)
def test_a_schema_the_role_may_not_use_is_a_configuration_mistake(error: BaseException) -> None:
    with pytest.raises(ConfigurationError, match="schema 'billing'") as raised:
        raise_as_store_error(error, schema="billing")
    assert "GRANT USAGE, CREATE ON SCHEMA billing" in str(raised.value)
    assert raised.value.__cause__ is error
