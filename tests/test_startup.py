"""Settings mistakes told from outages at start (`_startup`), function by function. What a
user sees when `Jobs` starts with such settings is in integration/test_startup.py."""

from __future__ import annotations

import logging
import socket

import pytest

from starlette_jobs import ConfigurationError
from starlette_jobs._startup import (
    REPORT_EVERY,
    OutageReport,
    check_connection,
    check_dsn,
    configuration_mistake,
)
from starlette_jobs.postgres._connections import (
    InvalidAuthorizationSpecificationError,
    InvalidCatalogNameError,
)
from tests.conftest import with_database


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://app@db/app",
        "postgres://app@db/app",
        "PostgreSQL://app@db/app",
        "postgresql:///app?host=/run/postgresql",
    ],
)
def test_postgresql_urls_pass(dsn: str) -> None:
    check_dsn(dsn, "dsn=")


@pytest.mark.parametrize(
    "dsn", ["postgres:/app", "mysql://app@db/app", "db:5432/app", "", "memory://"]
)
def test_anything_else_is_refused_saying_what_is_expected(dsn: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        check_dsn(dsn, "DATABASE_URL")
    assert str(refused.value) == (
        f"not a PostgreSQL URL: {dsn!r} (DATABASE_URL); "
        "expected postgresql://user:password@host:port/database"
    )


def test_the_refused_url_is_shown_without_its_password() -> None:
    with pytest.raises(ConfigurationError) as refused:
        check_dsn("mysql://app:s3cret@db/app", "dsn=")
    assert "s3cret" not in str(refused.value)
    assert "mysql://app:***@db/app" in str(refused.value)


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


async def test_an_outage_is_the_drivers_own_error() -> None:
    # Nothing listens on port 1: connection refused, which waiting may fix.
    with pytest.raises(OSError):  # noqa: PT011
        await check_connection("postgresql://app@127.0.0.1:1/app", "dsn=")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr("starlette_jobs._startup.time.monotonic", clock.monotonic)
    return clock


def test_an_outage_is_reported_again_every_period_and_when_its_reason_changes(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    refused = ConnectionRefusedError(111, "Connect call failed")
    report = OutageReport(refused)
    with caplog.at_level(logging.INFO, logger="starlette_jobs"):
        clock.now += 1
        report.failed(refused)  # what the start said already
        clock.now += REPORT_EVERY
        report.failed(refused)
        clock.now += 1
        report.failed(TimeoutError())  # a new reason: at once
        clock.now += 1
        report.failed(TimeoutError())
        clock.now += 1
        report.ended()
    assert caplog.messages == [
        f"PostgreSQL still unreachable after {1 + REPORT_EVERY:.0f} s: "
        "ConnectionRefusedError: [Errno 111] Connect call failed; retrying, and calls raise "
        "DatabaseUnavailableError until it answers",
        f"PostgreSQL still unreachable after {2 + REPORT_EVERY:.0f} s: TimeoutError; retrying, "
        "and calls raise DatabaseUnavailableError until it answers",
        f"PostgreSQL is reachable after {4 + REPORT_EVERY:.0f} s: started",
    ]
    assert [record.levelname for record in caplog.records] == ["WARNING", "WARNING", "INFO"]


def test_a_server_that_answers_but_refuses_the_settings_is_an_error(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    report = OutageReport(ConnectionRefusedError())
    with caplog.at_level(logging.INFO, logger="starlette_jobs"):
        report.failed(ConfigurationError("PostgreSQL refused the login"))
    [record] = caplog.records
    assert record.levelname == "ERROR"
    assert record.getMessage() == (
        "PostgreSQL answers but refuses to start: PostgreSQL refused the login; retrying"
    )
