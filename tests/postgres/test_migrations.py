"""The migrations produce exactly sql/schema.sql, and many processes migrate once."""

from __future__ import annotations

import asyncio
from importlib import resources
from typing import Any

import asyncpg
import pytest

from starlette_jobs import Jobs, SchemaVersionError
from starlette_jobs.postgres._migrations import apply_migrations, migrations, queries
from starlette_jobs.postgres._store import PostgresStore

# What defines the schema, read from the catalog: columns (with how each is stored),
# constraints, indexes, and storage parameters (autovacuum settings).
CATALOG = """
SELECT 'column', c.relname || '.' || a.attname,
       format_type(a.atttypid, a.atttypmod) || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
       || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
       || CASE WHEN a.attidentity <> '' THEN ' identity ' || a.attidentity::text ELSE '' END
       || ' storage ' || a.attstorage::text
  FROM pg_attribute a
  JOIN pg_class c ON c.oid = a.attrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE n.nspname = 'public' AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'constraint', conname, pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = 'public'::regnamespace
UNION ALL
SELECT 'index', indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'
UNION ALL
SELECT 'storage parameters', c.relname, array_to_string(c.reloptions, ', ')
  FROM pg_class c
 WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' AND c.reloptions IS NOT NULL
ORDER BY 1, 2
"""


async def catalog(connection: asyncpg.Connection[Any]) -> list[tuple[str, str, str]]:
    return [tuple(row) for row in await connection.fetch(CATALOG)]


async def test_migrations_produce_exactly_schema_sql(
    connection: asyncpg.Connection[Any],
) -> None:
    # `connection` is a database the migrations were applied to (a clone of the template).
    migrated = await catalog(connection)
    sql = resources.files("starlette_jobs.postgres").joinpath("sql")
    schema_sql = sql.joinpath("schema.sql").read_text()
    async with connection.transaction():
        await connection.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        await connection.execute(schema_sql)
        from_schema_sql = await catalog(connection)
    assert migrated == from_schema_sql
    assert any(kind == "index" and name == "starlette_jobs_claim_idx" for kind, name, _ in migrated)


async def test_many_processes_starting_at_once_migrate_once(database_dsn: str) -> None:
    async with asyncpg.create_pool(database_dsn, min_size=1, max_size=2) as pool:
        await pool.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    stores = [await PostgresStore.open(database_dsn, min_size=1, max_size=1) for _ in range(5)]
    try:
        results = await asyncio.gather(*(store.migrate() for store in stores))
        # One process applies every migration; the others find nothing left to do.
        assert sorted(len(applied) for applied in results) == [0, 0, 0, 0, len(migrations())]
        assert await stores[0].migrate() == []
        versions = await stores[0].pool.fetch("SELECT version FROM starlette_jobs_migrations")
        assert [row["version"] for row in versions] == [v for v, _, _ in migrations()]
    finally:
        for store in stores:
            await store.close()


@pytest.mark.parametrize("migrate", [True, False])
async def test_a_schema_newer_than_the_code_is_refused_at_start_naming_both_versions(
    database_dsn: str, connection: asyncpg.Connection[Any], migrate: bool
) -> None:
    newest = max(version for version, _, _ in migrations())
    await connection.execute(
        "INSERT INTO starlette_jobs_migrations (version, name) VALUES ($1, 'from_a_newer_release')",
        newest + 1,
    )
    with pytest.raises(SchemaVersionError) as refused:
        async with Jobs(database_dsn, migrate=migrate):
            pytest.fail("started on a schema this code does not know")
    assert f"it has migration {newest + 1}" in str(refused.value)
    assert f"knows migrations up to {newest}" in str(refused.value)


async def test_a_worker_without_migrations_refuses_an_unmigrated_database(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    await connection.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    with pytest.raises(SchemaVersionError, match="starlette-jobs migrate"):
        async with Jobs(database_dsn, migrate=False):
            pytest.fail("a worker started on a database without the jobs table")
    # Enqueue-only processes don't check for missing migrations: `starlette-jobs migrate` runs
    # as one of them.
    async with Jobs(database_dsn, migrate=False, queues={}) as jobs:
        assert await jobs.migrate()


async def migrated_up_to(connection: asyncpg.Connection[Any], last: int) -> None:
    """The database as an older release left it: migrated up to `last`."""
    await connection.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    q = queries()
    await connection.execute(q["create_migrations_table"])
    for version, name, sql in migrations():
        if version <= last:
            await connection.execute(sql)
            await connection.execute(q["record_migration"], version, name)


async def test_a_database_with_jobs_upgrades_to_the_newest_migration_keeping_them(
    connection: asyncpg.Connection[Any],
) -> None:
    # A database an older release migrated up to 0004, holding a job and its history.
    await migrated_up_to(connection, 4)
    job_id = await connection.fetchval(
        "INSERT INTO starlette_jobs (name, queue, payload, max_attempts)"
        " VALUES ('send', 'default', '{\"to\": 1}', 3) RETURNING id"
    )
    await connection.execute(
        "INSERT INTO starlette_jobs_events (job_id, kind, status, attempt)"
        " VALUES ($1, 'claimed', 'running', 1)",
        job_id,
    )

    applied = await apply_migrations(connection)

    assert applied == [name for version, name, _ in migrations() if version > 4]
    jobs = await connection.fetch("SELECT name, status, payload FROM starlette_jobs")
    assert [tuple(job) for job in jobs] == [("send", "pending", '{"to": 1}')]
    assert await connection.fetchval("SELECT count(*) FROM starlette_jobs_events") == 1
    schema_sql = resources.files("starlette_jobs.postgres").joinpath("sql", "schema.sql")
    upgraded = await catalog(connection)
    async with connection.transaction():
        await connection.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        await connection.execute(schema_sql.read_text())
        from_schema_sql = await catalog(connection)
    assert upgraded == from_schema_sql


async def test_a_migration_that_waits_on_a_table_locked_elsewhere_gives_up_applying_none(
    connection: asyncpg.Connection[Any], database_dsn: str
) -> None:
    # 0005 alters the jobs table, which needs it to itself: a transaction of the app's that
    # reads it holds the migration, and every claim and enqueue would queue behind the wait.
    await migrated_up_to(connection, 4)
    reader = await asyncpg.connect(database_dsn)
    try:
        async with reader.transaction():
            await reader.fetch("SELECT count(*) FROM starlette_jobs")
            with pytest.raises(asyncpg.LockNotAvailableError):
                await apply_migrations(connection, lock_wait=0.2)
        applied = await connection.fetch(queries()["applied_migrations"])
        assert max(row[0] for row in applied) == 4  # none of the newer ones, all or none
        assert await apply_migrations(connection, lock_wait=0.2)  # once it is free, they apply
    finally:
        await reader.close()


def test_a_shared_fragment_is_pasted_into_each_query_that_includes_it() -> None:
    # The waiting steps' release is one text in sql/queries.sql, ending both statements that
    # tell waiting steps of finished ones; a fragment is no query of its own.
    named = queries()
    assert "release_steps" not in named
    for name in ("record_outcomes", "settle_steps"):
        assert "-- include:" not in named[name]
        assert named[name].count("upstream_left = job.upstream_left - told.finished") == 1
