"""How the driver's errors are classified (`_connections`): what is a lost connection, what got
no answer, what never reached the server, and what callers see; and the timeouts
(`_connectivity`) they are given."""

from __future__ import annotations

import asyncpg
import pytest

from starlette_jobs import DatabaseUnavailableError
from starlette_jobs.postgres._connections import (
    connection_lost,
    never_sent,
    no_answer,
    unavailable_as_error,
)
from starlette_jobs.store._connectivity import session_settings, worker_statement_timeout

REFUSED_BEFORE_SENDING = asyncpg.InternalClientError(
    "cannot switch to state 12; another operation (2) is in progress"
)


@pytest.mark.parametrize(
    ("error", "lost", "unanswered", "unsent"),
    [
        (ConnectionResetError(), True, True, False),
        (asyncpg.ConnectionDoesNotExistError("closed in the middle"), True, True, False),
        (REFUSED_BEFORE_SENDING, True, True, True),
        # A TimeoutError is an OSError, yet the connection may be fine: not "lost".
        (TimeoutError(), False, True, False),
        (asyncpg.QueryCanceledError("canceling statement due to statement timeout"), *[False] * 3),
        (asyncpg.UniqueViolationError("duplicate key"), False, False, False),
        (ValueError("not the database"), False, False, False),
    ],
)
def test_errors_are_classified(
    error: BaseException, lost: bool, unanswered: bool, unsent: bool
) -> None:
    assert (connection_lost(error), no_answer(error), never_sent(error)) == (
        lost,
        unanswered,
        unsent,
    )


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (TimeoutError(), "unreachable or stopped answering"),
        (asyncpg.TooManyConnectionsError("sorry, too many clients"), "unreachable"),
        (asyncpg.QueryCanceledError("canceling statement"), "did not finish it in time"),
    ],
)
def test_callers_see_the_librarys_error_naming_the_call(error: BaseException, says: str) -> None:
    expected = pytest.raises(DatabaseUnavailableError, match=f"could not get job 7: .*{says}")
    with expected, unavailable_as_error("get job 7"):
        raise error


def test_other_errors_pass_through() -> None:
    with pytest.raises(ValueError, match="mine"), unavailable_as_error("enqueue"):
        raise ValueError("mine")


@pytest.mark.parametrize(
    ("lease", "timeout"), [(30.0, 10.0), (90.0, 10.0), (6.0, 2.0), (1.5, 1.0), (0.3, 1.0)]
)
def test_a_workers_statements_wait_a_third_of_the_lease_between_one_and_ten_seconds(
    lease: float, timeout: float
) -> None:
    assert worker_statement_timeout(lease) == timeout


def test_the_server_gives_a_statement_up_before_the_client_does() -> None:
    settings = session_settings(10.0, "claims")
    assert settings == {"statement_timeout": "8000", "application_name": "starlette_jobs claims"}
