"""`Jobs(schema=...)`: the PostgreSQL schema that holds the library's tables, and the names that
follow from it.

The tables are placed by the connections, not by the statements: every connection the store
opens sets `search_path` to the schema, so the statements of sql/queries.sql and the migrations
stay as they are. What a `search_path` does not reach is named here: the LISTEN/NOTIFY channels
(global to the database, so two schemas must not share them) and the advisory lock that
serializes migrations (per schema, so that two apps migrate independently).
"""

from __future__ import annotations

import hashlib
import re

from .._errors import JobDefinitionError

DEFAULT_CHANNEL_PREFIX = "starlette_jobs"
# A plain, lower-case identifier: the same name quoted or not, and no quoting rules to get wrong.
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# pg_advisory_xact_lock key that serializes migrations: the first 8 bytes of "starlette-jobs".
DEFAULT_MIGRATION_LOCK_KEY = int.from_bytes(b"stjobs\x00\x01", "big", signed=True)


def check_schema_name(schema: object) -> str | None:
    """`schema` if it is a schema name the library can use, or None (the connection's default
    `search_path`, as before schemas could be chosen).

    Raises:
        JobDefinitionError: not 1 to 63 lower-case letters, digits or '_' (not starting with a
            digit), or a name PostgreSQL keeps for itself.
    """
    if schema is None:
        return None
    if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
        raise JobDefinitionError(
            f"invalid schema name {schema!r}: use 1 to 63 lower-case letters, digits or '_', "
            "not starting with a digit (e.g. schema='billing')"
        )
    if schema.startswith("pg_") or schema == "information_schema":
        raise JobDefinitionError(
            f"invalid schema name {schema!r}: PostgreSQL keeps the pg_ names and "
            "information_schema for itself"
        )
    return schema


def search_path_settings(schema: str | None) -> dict[str, str]:
    """The session settings that place every statement of a connection in `schema`: none for
    the default. The name was checked (`check_schema_name`), so quoting it is all it needs."""
    return {} if schema is None else {"search_path": f'"{schema}"'}


def channel_prefix(schema: str | None) -> str:
    """What every LISTEN/NOTIFY channel of `schema` starts with. A channel name has at most 63
    bytes and a queue's name up to 48, so a schema's channels carry a short digest of its name
    rather than the name itself ("sj_" and 10 hex digits: no longer than the default prefix).
    `public` keeps the default channels, which a `Jobs` without a schema uses there."""
    if schema is None or schema == "public":
        return DEFAULT_CHANNEL_PREFIX
    return "sj_" + hashlib.blake2b(schema.encode(), digest_size=5).hexdigest()


def migration_lock_key(schema: str | None) -> int:
    """The advisory lock key that serializes the migrations of `schema`."""
    if schema is None or schema == "public":
        return DEFAULT_MIGRATION_LOCK_KEY
    digest = hashlib.blake2b(b"starlette-jobs migrations:" + schema.encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


def create_schema_statement(schema: str) -> str:
    """Creates `schema` if it is missing (run by the migrations, before their first table)."""
    return f'CREATE SCHEMA IF NOT EXISTS "{schema}"'


def with_channels(query: str, schema: str | None) -> str:
    """`query` (a named query of sql/queries.sql) with the channels of `schema`. Only the
    channel names change: the tables are found through the connection's `search_path`."""
    prefix = channel_prefix(schema)
    if prefix == DEFAULT_CHANNEL_PREFIX:
        return query
    return query.replace(f"'{DEFAULT_CHANNEL_PREFIX}:'", f"'{prefix}:'").replace(
        f"'{DEFAULT_CHANNEL_PREFIX}.", f"'{prefix}."
    )


def described(schema: str | None) -> str:
    """How messages name `schema`: "schema 'billing'", or "the database" without one."""
    return "the database" if schema is None else f"schema {schema!r}"


def lacks_tables(schema: str | None, what: str) -> str:
    """The message of a schema that lacks `what` ("migration(s) 0001_initial.sql", say),
    naming it and the command that migrates it."""
    option = "" if schema is None else f" --schema {schema}"
    return (
        f"{described(schema)} lacks {what}: run `starlette-jobs migrate{option}`, or start "
        "Jobs with migrate=True"
    )
