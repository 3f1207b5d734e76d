"""The PostgreSQL store as a module (`_postgres`): its named queries and shipped migrations, the
schema check, and what only it does (joining a caller's transaction). The semantics it shares
with the memory store are in contract/test_store_contract.py; migrating, in test_migrations.py."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

import starlette_jobs.postgres
from starlette_jobs import Jobs, SchemaVersionError, job
from starlette_jobs.postgres._migrations import migrations, queries
from starlette_jobs.postgres._store import PostgresStore
from tests.conftest import eventually
from tests.records import new_jobs


def test_every_query_the_store_runs_is_defined_and_every_defined_query_is_run() -> None:
    used: set[str] = set()
    for module in Path(starlette_jobs.postgres.__file__).parent.glob("*.py"):
        used |= set(re.findall(r'(?:_q|\bq)\["(\w+)"\]', module.read_text()))
    assert used == set(queries())


def test_each_query_numbers_its_parameters_from_one_without_gaps() -> None:
    for name, sql in queries().items():
        assert sql, name
        numbers = sorted({int(n) for n in re.findall(r"\$(\d+)", sql)})
        assert numbers == list(range(1, len(numbers) + 1)), f"{name}: parameters {numbers}"


def test_migrations_are_numbered_from_one_without_gaps_and_in_order() -> None:
    found = migrations()
    assert [version for version, _, _ in found] == list(range(1, len(found) + 1))
    for version, name, sql in found:
        assert name.startswith(f"{version:04d}_")
        assert name.endswith(".sql")
        assert sql.strip()


@pytest.fixture
async def store(database_dsn: str) -> AsyncIterator[PostgresStore]:
    opened = await PostgresStore.open(database_dsn, min_size=1, max_size=2)
    yield opened
    await opened.close()


async def test_a_migrated_database_passes_the_schema_check(store: PostgresStore) -> None:
    assert store.name == "PostgreSQL"
    await store.check_schema(complete=True)
    assert await store.migrate() == []


async def test_a_missing_migration_is_refused_only_when_the_schema_must_be_complete(
    store: PostgresStore, connection: asyncpg.Connection[Any]
) -> None:
    version, name, _ = migrations()[-1]
    await connection.execute("DELETE FROM starlette_jobs_migrations WHERE version = $1", version)
    await store.check_schema(complete=False)
    with pytest.raises(SchemaVersionError) as refused:
        await store.check_schema(complete=True)
    assert str(refused.value) == (
        f"the database lacks migration(s) {name}: run `starlette-jobs migrate`, or start Jobs "
        "with migrate=True"
    )


async def test_a_database_never_migrated_lacks_every_migration(
    store: PostgresStore, connection: asyncpg.Connection[Any]
) -> None:
    await connection.execute("DROP TABLE starlette_jobs_migrations")
    await store.check_schema(complete=False)  # a producer: `starlette-jobs migrate` is one
    with pytest.raises(SchemaVersionError, match=", ".join(n for _, n, _ in migrations())):
        await store.check_schema(complete=True)


async def test_a_schema_newer_than_the_code_is_refused_by_the_check_too(
    store: PostgresStore, connection: asyncpg.Connection[Any]
) -> None:
    await connection.execute(
        "INSERT INTO starlette_jobs_migrations (version, name) VALUES (9999, '9999_future.sql')"
    )
    with pytest.raises(SchemaVersionError, match="it has migration 9999"):
        await store.check_schema(complete=False)


async def test_an_insert_joins_the_callers_transaction(
    store: PostgresStore, connection: asyncpg.Connection[Any]
) -> None:
    transaction = connection.transaction()
    await transaction.start()
    [job_id] = await store.insert_jobs(new_jobs(1), connection)
    assert await store.get_job(job_id) is None  # not committed: invisible elsewhere
    await transaction.rollback()
    assert await store.list_jobs(None, None, 10) == []
    async with connection.transaction():
        [job_id] = await store.insert_jobs(new_jobs(1), connection)
    assert await store.get_job(job_id) is not None


async def test_a_batch_returns_its_ids_in_order(store: PostgresStore) -> None:
    ids = await store.insert_jobs(new_jobs(3, payload='{"n": 1}'))
    assert ids == sorted(ids)
    assert [r.id for r in await store.list_jobs(None, None, 10)] == ids[::-1]


async def test_after_expiring_its_connections_the_store_opens_new_ones(
    store: PostgresStore, connection: asyncpg.Connection[Any]
) -> None:
    [job_id] = await store.insert_jobs(new_jobs(1))
    before = {row[0] for row in await connection.fetch(APPLICATION_BACKENDS)}
    await store.expire_connections()
    assert await store.get_job(job_id) is not None
    await store.insert_jobs(new_jobs(1))
    after = {row[0] for row in await connection.fetch(APPLICATION_BACKENDS)}
    assert after - before, "no new connection was opened"


APPLICATION_BACKENDS = """
SELECT pid FROM pg_stat_activity
 WHERE datname = current_database() AND pid <> pg_backend_pid()
"""


async def test_opening_with_no_minimum_does_not_reach_the_server() -> None:
    # Nothing listens on port 1: opening succeeds, the first statement would not.
    store = await PostgresStore.open("postgresql://app@127.0.0.1:1/app", min_size=0, max_size=1)
    store.terminate()


# What a process keeps beside the pool, by `application_name` ("starlette_jobs <purpose>"): the
# worker's LISTEN, claims, outcomes and lease renewals, the enqueue connection, and the LISTEN of
# `jobs.wait`. docs/workers.md and docs/performance.md count them; change both with this.
OWN_CONNECTIONS = {
    "listen": 2, "claims": 1, "outcomes": 1, "leases": 1, "liveness": 1, "enqueue": 1
}  # fmt: skip
DOCUMENTED = "seven connections of its own"

_held = asyncio.Event()
_release = asyncio.Event()


@job(queue="connections")
async def held() -> None:
    _held.set()
    await _release.wait()


async def test_a_worker_that_enqueues_and_waits_opens_the_connections_the_docs_count(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    async def by_purpose() -> dict[str, int]:
        rows = await connection.fetch(
            "SELECT application_name, count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid() GROUP BY 1"
        )
        return {row[0].removeprefix("starlette_jobs "): row[1] for row in rows}

    async def leases_renewed() -> bool:
        return "leases" in await by_purpose()

    _held.clear()
    _release.clear()
    # A short lease renews (on its own connection) while the job runs.
    async with Jobs(
        database_dsn, queues={"connections": 10}, lease_duration=0.6, pool_max_size=3
    ) as jobs:
        job_id = await held.enqueue()
        await _held.wait()
        await eventually(leases_renewed, "a lease renewal")
        _release.set()
        await jobs.wait(job_id, timeout=10)
        connections = await by_purpose()
        assert 1 <= connections.pop("pool") <= 3
        assert connections == OWN_CONNECTIONS
    assert sum(OWN_CONNECTIONS.values()) == 7
    for page in ("workers.md", "performance.md"):
        text = " ".join((DOCS / page).read_text().split())
        assert DOCUMENTED in text, f"docs/{page} does not say {DOCUMENTED!r}"


DOCS = Path(__file__).resolve().parents[2] / "docs"
