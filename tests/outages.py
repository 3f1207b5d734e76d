"""A real PostgreSQL outage of one test's own database, without stopping the server that the
other tests share: the database stops taking connections (`ALLOW_CONNECTIONS false`, as an
operator does for maintenance) and every session on it is ended. A client's new connections
are refused (`database "..." is not currently accepting connections`, SQLSTATE 55000) until the
outage ends.

    async with database_refusing_connections(server_dsn, database_dsn):
        ...  # enqueue raises DatabaseUnavailableError
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

END_SESSIONS = """
    SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
     WHERE datname = $1 AND pid <> pg_backend_pid()
"""


def database_of(dsn: str) -> str:
    return urlsplit(dsn).path.lstrip("/")


@asynccontextmanager
async def database_refusing_connections(server_dsn: str, database_dsn: str) -> AsyncIterator[None]:
    """The database `database_dsn` names takes no connection, and has none, within the block:
    the admin statements run from the server's `postgres` database."""
    database = database_of(database_dsn)
    admin_dsn = urlunsplit(urlsplit(server_dsn)._replace(path="/postgres"))
    admin: asyncpg.Connection[Any] = await asyncpg.connect(admin_dsn)
    try:
        await admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
        try:
            await admin.fetchval(END_SESSIONS, database)
            yield
        finally:
            await admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
    finally:
        await admin.close()
