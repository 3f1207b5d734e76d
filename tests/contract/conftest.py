"""The store every contract test runs against: PostgreSQL (a fresh migrated database), then the
in-memory store, each test once for each."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.postgres._store import PostgresStore
from starlette_jobs.store._protocol import Store


@pytest.fixture(params=["postgres", "memory"])
def postgres_dsn(request: pytest.FixtureRequest) -> str | None:
    """A fresh migrated database for the PostgreSQL store; None for the memory store."""
    if request.param == "memory":
        return None
    dsn: str = request.getfixturevalue("database_dsn")
    return dsn


@pytest.fixture
async def store(postgres_dsn: str | None) -> AsyncIterator[Store]:
    opened: Store
    if postgres_dsn is None:
        opened = MemoryStore()
    else:
        opened = await PostgresStore.open(postgres_dsn, min_size=1, max_size=2)
    yield opened
    await opened.close()
