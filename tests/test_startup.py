"""The DSN checked and outages reported at start (`_startup`), function by function. Mistakes
told from outages by the driver's errors are in postgres/test_checks.py. What a
user sees when `Jobs` starts with such settings is in integration/test_startup.py."""

from __future__ import annotations

import logging

import pytest

from starlette_jobs import ConfigurationError
from starlette_jobs._startup import REPORT_EVERY, OutageReport, check_dsn


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
