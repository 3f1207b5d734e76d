"""The caller's transaction an enqueue joins (`configure(connection=...)`): an asyncpg
connection as it is, or a SQLAlchemy `AsyncSession` or `AsyncConnection` on asyncpg, turned
into the asyncpg connection its transaction runs on.

SQLAlchemy stays optional: it is never imported, only recognised by what it has. A session or
connection on another driver (psycopg, say) is refused: the insert is asyncpg's own statement,
and it must run on the very connection of the caller's transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from .._errors import JobDefinitionError
from ._connections import Connection, Record, is_driver_connection
from ._driver_errors import CALLERS_OWN, raise_as_store_error

if TYPE_CHECKING:
    from ._lanes import Executor


class _AsyncSessionLike(Protocol):
    """SQLAlchemy's `AsyncSession`, as far as this module needs it."""

    @property
    def sync_session(self) -> Any: ...

    async def connection(self) -> Any: ...


class _AsyncConnectionLike(Protocol):
    """SQLAlchemy's `AsyncConnection`, as far as this module needs it."""

    @property
    def dialect(self) -> Any: ...

    async def get_raw_connection(self) -> Any: ...


CallerTransaction: TypeAlias = "Connection | _AsyncSessionLike | _AsyncConnectionLike"
"""What `configure(connection=...)` takes."""


async def driver_connection(given: CallerTransaction) -> Connection:
    """The asyncpg connection whose transaction `given` is (or runs on).

    For SQLAlchemy, that is the session's connection, which it begins when it has none yet,
    and a transaction is begun on it if SQLAlchemy has not begun it yet: SQLAlchemy's asyncpg
    adapter sends BEGIN only before its own first statement, and an insert sent before that
    would commit on its own, whatever the session does next.

    Raises:
        JobDefinitionError: `given` is none of these, or SQLAlchemy on another driver.
    """
    if is_driver_connection(given):
        return given
    sqlalchemy: Any = given
    if hasattr(sqlalchemy, "sync_session"):  # an AsyncSession: its connection, begun
        sqlalchemy = await sqlalchemy.connection()
    if not (hasattr(sqlalchemy, "sync_connection") and hasattr(sqlalchemy, "get_raw_connection")):
        raise JobDefinitionError(
            "connection= takes an asyncpg connection, or a SQLAlchemy AsyncSession or "
            f"AsyncConnection on asyncpg; got {type(given).__name__}"
        )
    driver = getattr(sqlalchemy.dialect, "driver", None)
    if driver != "asyncpg":
        raise JobDefinitionError(
            f"connection=: this SQLAlchemy {type(given).__name__} uses the {driver} driver; "
            "starlette-jobs joins transactions on asyncpg only (a postgresql+asyncpg:// URL)"
        )
    raw = await sqlalchemy.get_raw_connection()
    connection = raw.driver_connection
    if not is_driver_connection(connection):
        raise JobDefinitionError(
            f"connection=: the SQLAlchemy {type(given).__name__} runs on "
            f"{type(connection).__name__}, not an asyncpg connection"
        )
    if not connection.is_in_transaction():
        # Any statement through SQLAlchemy begins its transaction (unless it is in autocommit
        # mode: then the job is written at once, as on a plain asyncpg connection).
        await sqlalchemy.exec_driver_sql("SELECT 1")
    return connection


class JoinedTransaction:
    """The caller's connection as the store's insert runs on it: the same statements, with the
    driver's errors raised as the library's (`_driver_errors.raise_as_store_error`), as on the
    store's own connections; but for those of the caller's own making (`CALLERS_OWN`)."""

    __slots__ = ("_connection",)

    def __init__(self, connection: Executor) -> None:
        self._connection = connection

    async def fetch(self, query: str, *args: Any) -> list[Record]:
        try:
            return await self._connection.fetch(query, *args)
        except CALLERS_OWN:
            raise
        except Exception as error:
            raise_as_store_error(error)

    async def fetchval(self, query: str, *args: Any) -> Any:
        try:
            return await self._connection.fetchval(query, *args)
        except CALLERS_OWN:
            raise
        except Exception as error:
            raise_as_store_error(error)
