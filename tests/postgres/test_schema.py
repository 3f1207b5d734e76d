"""`Jobs(schema=...)` on PostgreSQL (`postgres/_schema.py`): the tables and migrations in each
schema, channels that do not cross, the caller's connection checked, and a database used
without a schema working as before. What both stores share is in
tests/contract/test_schemas_contract.py."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from starlette_jobs import ConfigurationError, JobDefinitionError, Jobs, SchemaVersionError, job
from starlette_jobs.postgres._listener import channel_for
from starlette_jobs.postgres._migrations import migrations, queries
from starlette_jobs.postgres._schema import (
    DEFAULT_CHANNEL_PREFIX,
    channel_prefix,
    check_schema_name,
    migration_lock_key,
)
from tests.conftest import on_postgres
from tests.faultproxy import FaultProxy

ran: list[str] = []


@pytest.fixture(autouse=True)
def _nothing_ran_yet() -> None:
    ran.clear()


@job
async def tagged(tag: str) -> None:
    ran.append(tag)


async def schemas_of(connection: asyncpg.Connection[Any], table: str) -> list[str]:
    rows = await connection.fetch(
        "SELECT table_schema FROM information_schema.tables WHERE table_name = $1 ORDER BY 1",
        table,
    )
    return [row[0] for row in rows]


async def test_each_schema_gets_every_table_and_its_own_migrations(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    async with Jobs(database_dsn, schema="billing", queues={}):
        pass
    async with Jobs(database_dsn, schema="mail", queues={}):
        pass
    public_tables = await connection.fetch(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
    )
    for table in [row[0] for row in public_tables]:
        assert await schemas_of(connection, table) == ["billing", "mail", "public"], table
    every = [version for version, _, _ in migrations()]
    for schema in ("billing", "mail"):
        applied = await connection.fetch(
            f"SELECT version FROM {schema}.starlette_jobs_migrations ORDER BY 1"
        )
        assert [row[0] for row in applied] == every


async def test_a_schema_never_migrated_is_refused_at_start_without_migrate(
    database_dsn: str,
) -> None:
    with pytest.raises(SchemaVersionError, match="starlette-jobs migrate") as refused:
        async with Jobs(database_dsn, schema="never", migrate=False, require_database=True):
            pass
    assert "schema 'never'" in str(refused.value)


async def test_a_schema_that_the_connections_do_not_keep_is_refused_at_start(
    fault_proxy: FaultProxy,
) -> None:
    """A connection pooler that drops the `search_path` startup setting (PgBouncer with
    `ignore_startup_parameters = search_path`) would put every statement in the server's
    default schema, beside the default app's jobs, with no error: the start says so."""
    fault_proxy.dropped_parameters.add("search_path")
    with pytest.raises(ConfigurationError, match="search_path") as refused:
        async with Jobs(fault_proxy.dsn, schema="kept", queues={}, require_database=True):
            pytest.fail("started on connections outside its schema")
    assert "pooler" in str(refused.value)
    fault_proxy.dropped_parameters.clear()
    async with Jobs(fault_proxy.dsn, schema="kept", queues={}, require_database=True) as jobs:
        assert await jobs.enqueue(tagged, "kept") == 1


async def test_a_schema_on_the_default_search_path_is_warned_of(
    database_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """On the connections' default `search_path` (here the DSN's; also a role's own schema,
    `"$user"`), an app without `schema=` uses the same tables, with other channels and another
    migration lock: each waits for its poll to see the other's jobs, and their migrations race.
    """
    on_path = f"{database_dsn}{'&' if '?' in database_dsn else '?'}search_path=shared,public"
    with caplog.at_level(logging.WARNING, logger="starlette_jobs"):
        async with Jobs(on_path, schema="shared", queues={}, require_database=True):
            pass
    [warning] = [r.getMessage() for r in caplog.records if "default search_path" in r.getMessage()]
    assert "schema 'shared'" in warning
    caplog.clear()
    async with Jobs(database_dsn, schema="shared", queues={}, require_database=True):
        pass
    # `public` keeps the default channels and migration lock: sharing it is no mistake.
    async with Jobs(database_dsn, schema="public", queues={}, require_database=True):
        pass
    assert not [r for r in caplog.records if "default search_path" in r.getMessage()]


async def test_a_schema_the_role_may_not_use_is_a_configuration_mistake(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    """A schema an administrator made without granting it to the app's role: PostgreSQL says
    "no schema has been selected to create in" (no USAGE: the schema is not on the path at all)
    or "permission denied for schema" (USAGE without CREATE). The start says which schema, and
    what to grant, instead of the driver's error."""
    role = f"sj_schema_{os.getpid()}_{int(time.time() * 1000) % 10**9}"
    await connection.execute(f"CREATE ROLE {role} LOGIN")
    await connection.execute("CREATE SCHEMA granted_nothing; CREATE SCHEMA granted_usage")
    await connection.execute(f"GRANT USAGE ON SCHEMA granted_usage TO {role}")
    parts = urlsplit(database_dsn)
    as_role = urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rpartition('@')[2]}"))
    try:
        for schema in ("granted_nothing", "granted_usage"):
            with pytest.raises(ConfigurationError, match=f"schema '{schema}'") as refused:
                async with Jobs(as_role, schema=schema, queues={}, require_database=True):
                    pytest.fail("started without the right to use its schema")
            assert "GRANT" in str(refused.value)
    finally:
        await connection.execute("DROP SCHEMA granted_nothing, granted_usage CASCADE")
        await connection.execute(f"DROP ROLE {role}")


async def test_calls_in_a_schema_never_migrated_say_to_migrate_it(database_dsn: str) -> None:
    """A process that only enqueues starts without the tables (`starlette-jobs migrate` may
    run as one such, or before it); its calls then raise the library's error, which names the
    schema and what to do, not the driver's "relation does not exist"."""
    async with Jobs(database_dsn, schema="never", migrate=False, queues={}) as jobs:
        with pytest.raises(SchemaVersionError, match="starlette-jobs migrate") as refused:
            await jobs.enqueue(tagged, "x")
        assert "schema 'never'" in str(refused.value)
        assert isinstance(refused.value.__cause__, asyncpg.UndefinedTableError)
        with pytest.raises(SchemaVersionError, match="starlette-jobs migrate"):
            await jobs.count_by_status()


async def test_an_existing_database_without_a_schema_keeps_working_beside_one(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    """The test database was migrated before schemas existed (in public): a Jobs without a
    schema uses it as before, and a Jobs with one leaves it alone."""
    async with (
        Jobs(database_dsn, poll_interval=0.05) as plain,
        Jobs(database_dsn, schema="billing", queues={}) as billing,
    ):
        await billing.enqueue(tagged, "billing")
        await plain.enqueue(tagged, "plain")
        await plain.drain(timeout=10)
    assert ran == ["plain"]
    assert await connection.fetchval("SELECT count(*) FROM public.starlette_jobs") == 1
    assert await connection.fetchval("SELECT status FROM billing.starlette_jobs") == "pending"


async def test_a_notification_of_one_schema_does_not_reach_anothers_listeners(
    database_dsn: str,
) -> None:
    """NOTIFY arrives in commit order: when billing's wake-up arrives, a wake-up of the mail
    app sent before it would have arrived first."""
    heard: asyncio.Queue[str] = asyncio.Queue()
    listening = await asyncpg.connect(database_dsn)
    try:
        for channel in (channel_for("default", channel_prefix("billing")), channel_for("default")):
            await listening.add_listener(channel, lambda *args: heard.put_nowait(args[2]))
        async with (
            Jobs(database_dsn, schema="billing", queues={}) as billing,
            Jobs(database_dsn, schema="mail", queues={}) as mail,
        ):
            await mail.enqueue(tagged, "mail")
            await billing.enqueue(tagged, "billing")
            assert await asyncio.wait_for(heard.get(), 10) == channel_for(
                "default", channel_prefix("billing")
            )
            assert heard.empty()
    finally:
        await listening.close()


async def test_a_callers_connection_must_have_the_schema_in_its_search_path(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    """The store cannot place the caller's statements by their connection: it checks it."""
    async with Jobs(database_dsn, schema="billing", queues={}):
        with pytest.raises(JobDefinitionError, match=r"search_path.*'billing'"):
            async with connection.transaction():
                await tagged.configure(connection=connection).enqueue("public")
        placed = await asyncpg.connect(database_dsn, server_settings={"search_path": "billing"})
        try:
            async with placed.transaction():
                await tagged.configure(connection=placed).enqueue("billing")
        finally:
            await placed.close()
    assert await connection.fetchval("SELECT count(*) FROM public.starlette_jobs") == 0
    assert await connection.fetchval("SELECT count(*) FROM billing.starlette_jobs") == 1


async def test_the_store_runs_in_its_schema(database_dsn: str) -> None:
    async with Jobs(database_dsn, schema="billing", queues={}) as billing:
        store = on_postgres(billing)
        assert await store.pool.fetchval("SELECT current_schema()") == "billing"


def test_a_schemas_channels_fit_the_longest_queue_name() -> None:
    longest = "q" * 48
    for schema in ("a", "billing", "s" * 63):
        assert len(channel_for(longest, channel_prefix(schema))) <= 63
    assert channel_prefix(None) == channel_prefix("public") == DEFAULT_CHANNEL_PREFIX
    assert channel_prefix("billing") != channel_prefix("mail")


def test_each_schema_migrates_under_a_lock_of_its_own() -> None:
    assert migration_lock_key(None) == migration_lock_key("public")
    keys = {migration_lock_key(schema) for schema in (None, "billing", "mail")}
    assert len(keys) == 3


@pytest.mark.parametrize("name", ["billing", "_x", "a1", "a" * 63])
def test_plain_identifiers_are_accepted(name: str) -> None:
    assert check_schema_name(name) == name
    assert check_schema_name(None) is None


@pytest.mark.parametrize("name", ["information_schema", "pg_catalog", "Mail", "a b", "ä"])
def test_names_postgres_keeps_or_that_need_quoting_are_refused(name: str) -> None:
    with pytest.raises(JobDefinitionError, match=f"invalid schema name {name!r}"):
        check_schema_name(name)


def test_every_channel_of_a_schemas_statements_is_the_schemas() -> None:
    default, billing = queries(), queries("billing")
    prefix = channel_prefix("billing")
    assert default.keys() == billing.keys()
    for name, text in billing.items():
        assert f"'{DEFAULT_CHANNEL_PREFIX}:" not in text, name
        assert f"'{DEFAULT_CHANNEL_PREFIX}." not in text, name
        assert text.count(f"'{prefix}") == default[name].count(f"'{DEFAULT_CHANNEL_PREFIX}:") + (
            default[name].count(f"'{DEFAULT_CHANNEL_PREFIX}.")
        ), name
