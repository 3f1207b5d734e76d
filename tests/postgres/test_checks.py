"""Settings mistakes told from outages at start by the driver's errors (`postgres/_checks.py`).
What a user sees when `Jobs` starts with such settings is in integration/test_startup.py."""

from __future__ import annotations

import asyncio
import socket

import pytest

from starlette_jobs import ConfigurationError, DatabaseUnavailableError
from starlette_jobs.postgres._checks import _on_path, check_connection, configuration_mistake
from starlette_jobs.postgres._driver_errors import (
    InvalidAuthorizationSpecificationError,
    InvalidCatalogNameError,
)
from tests.conftest import with_database

DSN = "postgresql://app:s3cret@db.example:5432/shop"


def test_a_missing_database_says_how_to_create_it() -> None:
    error = InvalidCatalogNameError('database "shop" does not exist')
    mistake = configuration_mistake(error, DSN, "dsn=")
    assert str(mistake) == (
        'database "shop" does not exist on postgresql://app:***@db.example:5432/shop (dsn=): '
        "create it (CREATE DATABASE shop) or fix the database name in the DSN"
    )


def test_a_refused_login_says_to_check_the_credentials_and_names_pg_hba_when_it_is_why() -> None:
    password = InvalidAuthorizationSpecificationError('password authentication failed for "app"')
    mistake = configuration_mistake(password, DSN, "dsn=")
    assert mistake is not None
    assert str(mistake).startswith("PostgreSQL refused the login on postgresql://app:***@")
    assert "check the user name and password in the DSN" in str(mistake)
    assert "pg_hba.conf" not in str(mistake)
    hba = InvalidAuthorizationSpecificationError('no pg_hba.conf entry for host "10.0.0.1"')
    assert "(or the server's pg_hba.conf)" in str(configuration_mistake(hba, DSN, "dsn="))


@pytest.mark.parametrize(
    ("dsn", "host"),
    [
        ("postgresql://app:pw@db.example:5432/shop", "db.example"),
        ("postgresql://db.example/shop?sslmode=require", "db.example"),
        ("postgresql://app@db.example", "db.example"),
        ("postgresql://app@[::1]:5432/shop", "[::1]:5432"),  # left whole, not misread
    ],
)
def test_an_unknown_host_is_named(dsn: str, host: str) -> None:
    error = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    assert f"unknown host {host!r} in " in str(configuration_mistake(error, dsn, "dsn="))


def test_a_dsn_the_driver_cannot_parse_is_invalid() -> None:
    mistake = configuration_mistake(ValueError("invalid port '54x2'"), DSN, "dsn=")
    assert str(mistake) == (
        "invalid DSN postgresql://app:***@db.example:5432/shop (dsn=): invalid port '54x2'; "
        "expected postgresql://user:password@host:port/database"
    )


async def test_a_reachable_database_passes_the_check(database_dsn: str) -> None:
    await check_connection(database_dsn, "dsn=")


async def test_a_missing_database_stops_the_check_with_the_mistake_alone(database_dsn: str) -> None:
    with pytest.raises(ConfigurationError, match="CREATE DATABASE") as refused:
        await check_connection(with_database(database_dsn, "no_such_db_here"), "dsn=")
    # One clear line: the driver's error is at hand, but not chained for printing.
    assert refused.value.__cause__ is None
    assert refused.value.__suppress_context__
    assert isinstance(refused.value.__context__, InvalidCatalogNameError)


@pytest.mark.parametrize(
    ("query_or_port", "said"),
    [
        (":99999", "invalid DSN"),  # the driver's OverflowError, not a ValueError
        ("?connect_timeout=abc", "PostgreSQL refused a setting of the DSN"),  # no such setting
        ("?options=-c%20statement_timeout%3Dx", "PostgreSQL refused a setting of the DSN"),
    ],
)
async def test_a_dsn_setting_that_cannot_work_is_a_configuration_error(
    database_dsn: str, query_or_port: str, said: str
) -> None:
    if query_or_port.startswith(":"):
        dsn = "postgresql://app@127.0.0.1" + query_or_port + "/app"
    else:  # after the DSN's own query, if any (the embedded server's socket directory)
        dsn = database_dsn + ("&" if "?" in database_dsn else "?") + query_or_port[1:]
    with pytest.raises(ConfigurationError, match=said) as refused:
        await check_connection(dsn, "dsn=")
    assert "\n" not in str(refused.value)
    assert refused.value.__cause__ is None


async def test_a_dsn_that_requires_tls_of_a_server_without_it_is_a_configuration_error() -> None:
    """A server that answers "no" to TLS (as one with ssl off does) and a DSN with
    `sslmode=require`: a mistake in the settings (`starlette-jobs` exits 2), not an outage to
    wait out (it exited 4)."""

    answered = asyncio.Event()

    async def no_tls(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readexactly(8)  # the SSLRequest
            writer.write(b"N")
            await writer.drain()
            await reader.read()  # until the client hangs up
        finally:
            writer.close()
            await writer.wait_closed()
            answered.set()

    server = await asyncio.start_server(no_tls, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(ConfigurationError, match="takes no TLS connections"):
            await check_connection(f"postgresql://app@127.0.0.1:{port}/app?sslmode=require", "dsn=")
        await asyncio.wait_for(answered.wait(), 10)
    finally:
        server.close()
        await server.wait_closed()


async def test_an_outage_is_the_stores_unavailable_error() -> None:
    # Nothing listens on port 1: connection refused, which waiting may fix.
    with pytest.raises(DatabaseUnavailableError):
        await check_connection("postgresql://app@127.0.0.1:1/app", "dsn=")


@pytest.mark.parametrize(
    ("search_path", "names"),
    [
        ('"$user", public', {"ada", "public"}),  # PostgreSQL's default: the role's own schema
        ("billing,public", {"billing", "public"}),
        ('"billing"', {"billing"}),
        ("Billing, public", {"billing", "public"}),  # a plain name, as PostgreSQL folds it
        ('"a,b", c', {"a,b", "c"}),
        ('"Quoted ""name"""', {'Quoted "name"'}),
    ],
)
def test_the_schemas_on_a_search_path_are_read_with_the_role_for_user(
    search_path: str, names: set[str]
) -> None:
    assert _on_path(search_path, "ada") == names
