"""The plugin's fixtures: a PostgreSQL server for the session (DATABASE_URL's, or an embedded
one in a temporary directory), a template database migrated once, a fresh clone of it per test,
and a `memory://` URL per test."""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from ..memory._store import is_memory_dsn
from ..postgres._connections import run_admin_statements
from ..postgres._embedded import release_embedded_postgres, start_embedded_postgres
from ..postgres._store import PostgresStore


def _with_database(dsn: str, database: str) -> str:
    return urlunsplit(urlsplit(dsn)._replace(path="/" + database))


def _run(statements: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Runs the coroutine `statements()` makes to its end, from a sync fixture: on a loop of its
    own, in a thread of its own when this thread runs a loop already (an async test that takes
    the fixture through `request.getfixturevalue`), since `asyncio.run` cannot run inside one."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(statements())
        return
    with ThreadPoolExecutor(1, thread_name_prefix="starlette-jobs-fixture") as thread:
        thread.submit(lambda: asyncio.run(statements())).result()


def _admin(server: str, statement: str) -> None:
    _run(lambda: run_admin_statements(server, statement))


def configured_server() -> str | None:
    """`DATABASE_URL`, unless it is unset or names an in-memory store (`memory://`, which a
    project may set for its app's own tests): no PostgreSQL server to make databases on."""
    configured = os.environ.get("DATABASE_URL")
    if not configured or is_memory_dsn(configured):
        return None
    return configured


# A test session's embedded server is thrown away at its end, so its data may live in memory.
MEMORY_BACKED_DIR = Path("/dev/shm")
MEMORY_NEEDED = 4 * 2**30
"""Free room that memory must have for the test server's data: its WAL alone may grow to 1 GB
(max_wal_size) before it is recycled, and a test may fill a database of its own."""


def _in_memory() -> str | None:
    """Where the test session's embedded server keeps its data: in memory (`/dev/shm`) when
    there is room, else None (the temporary directory). Each test's `CREATE DATABASE` writes
    some 300 files; on a disk the file system slows down as dropped databases leave deleted
    files behind (ext4 steps over recently freed inodes: 200-400 ms a database after a few
    hundred tests, measured), in memory it takes 20 ms."""
    try:
        roomy = (
            MEMORY_BACKED_DIR.is_dir()
            and os.access(MEMORY_BACKED_DIR, os.W_OK | os.X_OK)
            and shutil.disk_usage(MEMORY_BACKED_DIR).free >= MEMORY_NEEDED
        )
    except OSError:
        roomy = False
    return str(MEMORY_BACKED_DIR) if roomy else None


@pytest.fixture(scope="session")
def jobs_server() -> Iterator[str]:
    """The URL of the server this test session's databases live on: `DATABASE_URL`'s, or an
    embedded PostgreSQL in a temporary directory, stopped at the end of the session."""
    configured = configured_server()
    if configured:
        yield configured
        return
    with tempfile.TemporaryDirectory(prefix="starlette-jobs-tests-", dir=_in_memory()) as scratch:
        data_dir = Path(scratch) / "pgdata"
        try:
            yield start_embedded_postgres(data_dir)
        finally:
            release_embedded_postgres(data_dir)


@pytest.fixture(scope="session")
def jobs_template_database(jobs_server: str) -> Iterator[str]:
    """The name of a database migrated once for the session, cloned by `jobs_database`."""
    name = f"sj_template_{os.getpid()}_{uuid.uuid4().hex[:8]}"

    async def create() -> None:
        await run_admin_statements(jobs_server, f'CREATE DATABASE "{name}"')
        store = await PostgresStore.open(_with_database(jobs_server, name), min_size=1, max_size=1)
        try:
            await store.migrate()
        finally:
            await store.close()

    _run(create)
    yield name
    _admin(jobs_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


_database_numbers = itertools.count()


@pytest.fixture
def jobs_database(jobs_server: str, jobs_template_database: str) -> Iterator[str]:
    """The URL of a fresh, migrated database of this test's own; dropped after it."""
    name = f"sj_test_{os.getpid()}_{next(_database_numbers)}"
    create = f'CREATE DATABASE "{name}" TEMPLATE "{jobs_template_database}"'
    _admin(jobs_server, create)
    yield _with_database(jobs_server, name)
    _admin(jobs_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def jobs_memory() -> str:
    """A `memory://` URL naming an in-memory store of this test's own."""
    return f"memory://test-{uuid.uuid4().hex}"


# -- helpers -------------------------------------------------------------------------------------
