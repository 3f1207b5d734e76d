"""Where a benchmark's PostgreSQL runs: the server at the given DSN, else an embedded one in a
temporary data directory, dropped at the end; and a database of the run's own on it."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from starlette_jobs import Jobs


async def on_a_server(dsn: str | None, run: Callable[[str], Awaitable[None]]) -> None:
    """Awaits `run(dsn)`: with `dsn` if given, else with an embedded server's."""
    if dsn:
        await run(dsn)
        return
    with tempfile.TemporaryDirectory() as data_dir:
        embedded = Jobs(queues={}, embedded_data_dir=data_dir)
        async with embedded:
            assert embedded.dsn is not None
            await run(embedded.dsn)


def with_database(dsn: str, name: str) -> str:
    """`dsn`, on the database `name` of the same server."""
    return urlunsplit(urlsplit(dsn)._replace(path="/" + name))


@contextlib.asynccontextmanager
async def throw_away_database(server_dsn: str, prefix: str) -> AsyncIterator[str]:
    """The DSN of a new, empty database `<prefix>_<pid>` on the server, dropped at the end
    together with whatever connections are still on it."""
    name = f"{prefix}_{os.getpid()}"
    admin: asyncpg.Connection[Any] = await asyncpg.connect(server_dsn)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield with_database(server_dsn, name)
        finally:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()
