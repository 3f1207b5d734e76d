"""What a recurring duty logs of its failures (`_failures.py`): an outage once, not once
a try; each other kind of failure once; its end once, with how many tries failed."""

from __future__ import annotations

import logging

import pytest

from starlette_jobs import DatabaseUnavailableError
from starlette_jobs._failures import FailureLog

logger = logging.getLogger("tests.failures")


def _said(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(record.levelname, record.getMessage()) for record in caplog.records]


def test_an_outage_is_said_once_whatever_its_errors_say_then_its_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failures = FailureLog(logger, "renewing leases")
    with caplog.at_level(logging.INFO, logger.name):
        failures.failed(DatabaseUnavailableError("connection reset by peer"))
        for _ in range(50):
            failures.failed(DatabaseUnavailableError("connection refused"))
        failures.succeeded()
        failures.succeeded()  # nothing to say: it did not fail since
    assert _said(caplog) == [
        ("WARNING", "renewing leases failed, retrying: connection reset by peer"),
        ("INFO", "renewing leases works again, after 51 failed tries"),
    ]


def test_the_repeats_are_kept_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    failures = FailureLog(logger, "upkeep")
    with caplog.at_level(logging.DEBUG, logger.name):
        failures.failed(DatabaseUnavailableError("refused"))
        failures.failed(DatabaseUnavailableError("refused"))
    assert _said(caplog) == [
        ("WARNING", "upkeep failed, retrying: refused"),
        ("DEBUG", "upkeep failed again, retrying: refused"),
    ]


def test_a_second_outage_is_said_again(caplog: pytest.LogCaptureFixture) -> None:
    failures = FailureLog(logger, "upkeep")
    with caplog.at_level(logging.INFO, logger.name):
        failures.failed(DatabaseUnavailableError("refused"))
        failures.succeeded()
        failures.failed(DatabaseUnavailableError("refused"))
    assert [level for level, _ in _said(caplog)] == ["WARNING", "INFO", "WARNING"]
    assert _said(caplog)[1] == ("INFO", "upkeep works again, after 1 failed try")


def test_other_errors_are_said_once_each_with_their_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failures = FailureLog(logger, "claiming from queue 'mail'")
    with caplog.at_level(logging.INFO, logger.name):
        for _ in range(3):
            failures.failed(RuntimeError("cannot execute UPDATE in a read-only transaction"))
        failures.failed(DatabaseUnavailableError("refused"))
        failures.failed(RuntimeError("too many connections"))
        failures.failed(DatabaseUnavailableError("reset"))
    errors = [record for record in caplog.records if record.levelno == logging.ERROR]
    assert [str(record.exc_info[1]) if record.exc_info else None for record in errors] == [
        "cannot execute UPDATE in a read-only transaction",
        "too many connections",
    ]
    assert _said(caplog) == [
        ("ERROR", "claiming from queue 'mail' failed, retrying"),
        ("WARNING", "claiming from queue 'mail' failed, retrying: refused"),
        ("ERROR", "claiming from queue 'mail' failed, retrying"),
    ]
