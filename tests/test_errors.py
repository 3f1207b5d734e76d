"""The library's exceptions (`_errors`): one base class, the standard class each also is (so
callers can catch them as such), and what `JobArgumentsError` (and `IdempotencyKeyReusedError`)
carries for a 422 answer."""

from __future__ import annotations

import inspect
import json

import pytest

import starlette_jobs
from starlette_jobs import _errors
from starlette_jobs._errors import (
    ConfigurationError,
    DatabaseTooSlowError,
    DatabaseUnavailableError,
    EmbeddedPostgresUnavailable,
    IdempotencyKeyReusedError,
    JobArgumentsError,
    JobDefinitionError,
    JobNotFoundError,
    JobResultError,
    MemoryStoreUnsupportedError,
    NotStartedError,
    OnSuccessError,
    ScheduleDefinitionError,
    SchemaVersionError,
    StarletteJobsError,
    UniqueKeyTakenError,
    UnknownJobError,
    unavailable_as_error,
)

ERRORS = [
    value
    for value in vars(_errors).values()
    if inspect.isclass(value) and issubclass(value, BaseException)
]


# Errors that callers meet as the public class they derive from, and why.
NOT_EXPORTED: dict[type[BaseException], type[BaseException]] = {
    # The worker's own signal to send a batch again in halves; callers see it as unavailable.
    DatabaseTooSlowError: DatabaseUnavailableError,
}


def test_every_error_derives_from_the_base_class_and_is_exported() -> None:
    assert len(ERRORS) == 24
    for error in ERRORS:
        assert issubclass(error, StarletteJobsError), error
        exported = NOT_EXPORTED.get(error, error)
        assert issubclass(error, exported)
        assert getattr(starlette_jobs, exported.__name__) is exported
        assert error.__doc__, f"{error.__name__} says nothing of what went wrong"
    assert not hasattr(starlette_jobs, "DatabaseTooSlowError")


@pytest.mark.parametrize(
    ("error", "standard"),
    [
        (JobArgumentsError, ValueError),
        (IdempotencyKeyReusedError, JobArgumentsError),
        (JobDefinitionError, ValueError),
        (ScheduleDefinitionError, JobDefinitionError),
        (JobResultError, ValueError),
        (ConfigurationError, ValueError),
        (UnknownJobError, LookupError),
        (JobNotFoundError, LookupError),
        (NotStartedError, RuntimeError),
        (OnSuccessError, RuntimeError),
        (SchemaVersionError, RuntimeError),
        (EmbeddedPostgresUnavailable, RuntimeError),
        (DatabaseUnavailableError, ConnectionError),
        (MemoryStoreUnsupportedError, NotImplementedError),
    ],
)
def test_each_error_is_also_the_standard_exception_callers_expect(
    error: type[Exception], standard: type[Exception]
) -> None:
    assert issubclass(error, standard)


def test_unique_key_taken_is_no_standard_error() -> None:
    # Not a ValueError: the arguments were fine, another job holds the key.
    assert UniqueKeyTakenError.__mro__[1:] == (StarletteJobsError, Exception, BaseException, object)


def test_job_arguments_error_names_the_job_and_each_location() -> None:
    errors = [
        {"loc": ("user_id",), "msg": "Input should be a valid integer", "type": "int_parsing"},
        {"loc": ("address", "city"), "msg": "Field required", "type": "missing"},
        {"loc": (), "msg": "missing a required argument: 'email'", "type": "arguments"},
    ]
    error = JobArgumentsError("app.send_welcome", errors)
    assert str(error) == (
        "invalid arguments for job 'app.send_welcome': "
        "user_id: Input should be a valid integer; address.city: Field required; "
        "(arguments): missing a required argument: 'email'"
    )
    assert error.job_name == "app.send_welcome"
    assert error.errors is errors
    json.dumps(error.errors)  # ready for a JSONResponse as it is


def test_job_arguments_error_takes_error_dicts_without_loc_or_msg() -> None:
    assert (
        str(JobArgumentsError("j", [{"type": "odd"}]))
        == "invalid arguments for job 'j': (arguments): "
    )


def test_a_reused_idempotency_key_names_the_job_that_holds_it_for_the_log_only() -> None:
    error = IdempotencyKeyReusedError("app.charge", 41, "k1")
    assert str(error) == (
        "idempotency key 'k1' of job 'app.charge' is held by job 41, enqueued with different "
        "arguments; a retry must repeat the arguments of the first try, and a new request needs "
        "a new key"
    )
    assert (error.job_name, error.job_id, error.idempotency_key) == ("app.charge", 41, "k1")
    # What a client is shown names neither the job nor the key.
    [shown] = error.errors
    assert shown["type"] == "idempotency_key_reused"
    assert shown["loc"] == ()
    assert "41" not in shown["msg"]
    assert "k1" not in shown["msg"]


@pytest.mark.parametrize("kind", [DatabaseUnavailableError, DatabaseTooSlowError])
def test_a_caller_names_what_it_was_doing_when_the_database_was_unavailable(
    kind: type[DatabaseUnavailableError],
) -> None:
    cause = kind("PostgreSQL is unreachable or stopped answering (TimeoutError)")
    with pytest.raises(kind) as raised, unavailable_as_error("get job 7"):
        raise cause
    assert str(raised.value) == (
        "could not get job 7: PostgreSQL is unreachable or stopped answering (TimeoutError)"
    )
    assert type(raised.value) is kind
    assert raised.value.__cause__ is cause


def test_a_caller_naming_its_action_lets_other_errors_through() -> None:
    with pytest.raises(TimeoutError), unavailable_as_error("enqueue"):
        raise TimeoutError  # not the database's: the stores raise DatabaseUnavailableError
