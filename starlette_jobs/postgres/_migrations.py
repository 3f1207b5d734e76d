"""The SQL the PostgreSQL store runs: the named queries of sql/queries.sql, and the migrations
of sql/migrations/, applied in order under an advisory lock, with a refusal to run against a
schema newer than this code."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from .._errors import SchemaVersionError
from ._connections import Connection
from ._schema import create_schema_statement, lacks_tables, migration_lock_key, with_channels

# A named query, or a fragment of one: CTEs that several queries share, pasted where a query
# says `-- include: NAME` on a line of its own, so that one piece of logic has one text.
_HEADER = re.compile(r"^-- (name|fragment): (\w+)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"^-- include: (\w+)\s*$", re.MULTILINE)
_MIGRATION_FILE = re.compile(r"(\d{4})_\w+\.sql")


@cache
def queries(schema: str | None = None) -> dict[str, str]:
    """The named queries of sql/queries.sql, read once, with the channels of `schema`
    (`Jobs(schema=...)`; None: the default)."""
    if schema is not None:
        return {name: with_channels(text, schema) for name, text in queries().items()}
    text = resources.files(__package__).joinpath("sql", "queries.sql").read_text("utf-8")
    parts = _HEADER.split(text)
    # parts = [preamble, kind1, name1, body1, kind2, name2, body2, ...]
    sections = list(zip(parts[1::3], parts[2::3], parts[3::3], strict=True))
    fragments = {name: body.strip() for kind, name, body in sections if kind == "fragment"}
    return {
        name: _INCLUDE.sub(lambda found: fragments[found.group(1)], body.strip())
        for kind, name, body in sections
        if kind == "name"
    }


def migrations() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of every shipped migration, in order."""
    folder = resources.files(__package__).joinpath("sql", "migrations")
    found = []
    for entry in folder.iterdir():
        match = _MIGRATION_FILE.fullmatch(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text("utf-8")))
    return sorted(found)


def check_schema_version(
    applied: set[int], *, missing_is_error: bool = False, schema: str | None = None
) -> None:
    known = {version: name for version, name, _ in migrations()}
    newer = sorted(applied - known.keys())
    if newer:
        raise SchemaVersionError(
            f"the database's schema is newer than this code: it has migration {newer[-1]}, "
            f"this version of starlette-jobs knows migrations up to {max(known)}. Upgrade "
            "starlette-jobs here (a newer release migrated this database); the older code would "
            "misread its rows"
        )
    missing = sorted(known.keys() - applied)
    if missing and missing_is_error:
        names = ", ".join(known[version] for version in missing)
        raise SchemaVersionError(lacks_tables(schema, f"migration(s) {names}"))


# The longest a migration waits for a lock on a table (a DDL statement needs the table to itself).
# Waiting longer would hold every claim and enqueue behind it: better to fail, and let the start
# report the database as unavailable and try again.
MIGRATION_LOCK_WAIT = 10.0


async def apply_migrations(
    connection: Connection, lock_wait: float = MIGRATION_LOCK_WAIT, schema: str | None = None
) -> list[str]:
    """Applies the migrations the database lacks, in one transaction on `connection`; returns
    their names. Raises the driver's `LockNotAvailableError`, applying none, when a table stays
    locked elsewhere (a long transaction of the app's, say) for `lock_wait` seconds.

    With `schema`, `connection`'s `search_path` must be that schema (`_schema`): it is created
    if missing, and its migrations (and their table, and their lock) are its own."""
    q = queries()
    applied_now = []
    async with connection.transaction():
        await connection.execute(q["lock_migrations"], migration_lock_key(schema))
        # CREATE SCHEMA IF NOT EXISTS would ask for the right to create schemas even when it
        # exists: a role that was given the schema (and no more) migrates it all the same.
        if schema is not None and not await connection.fetchval(q["schema_exists"], schema):
            await connection.execute(create_schema_statement(schema))
        await connection.execute(q["create_migrations_table"])
        done = {row[0] for row in await connection.fetch(q["applied_migrations"])}
        check_schema_version(done)
        # After the advisory lock: waiting for another process's migrations is no harm.
        await connection.execute(f"SET LOCAL lock_timeout = '{int(lock_wait * 1000)}ms'")
        for version, name, sql in migrations():
            if version not in done:
                await connection.execute(sql)
                await connection.execute(q["record_migration"], version, name)
                applied_now.append(name)
    return applied_now
