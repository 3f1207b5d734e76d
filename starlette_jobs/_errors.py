"""Every exception starlette-jobs raises on purpose, in one place."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._records import JobRecord


class StarletteJobsError(Exception):
    """Base class of the errors this library raises."""


class JobArgumentsError(StarletteJobsError, ValueError):
    """The arguments given to a job do not match its signature, or cannot be stored as JSON,
    or come with an idempotency key a job with other arguments holds (`IdempotencyKeyReusedError`).

    Raised by `enqueue` before anything is written. `errors` holds pydantic's list of error
    dicts (`loc`, `msg`, `type`, ...), so a request handler can answer 422 with it as it is.
    """

    def __init__(self, job_name: str, errors: list[dict[str, Any]]) -> None:
        self.job_name = job_name
        self.errors = errors
        super().__init__(self._message())

    def _message(self) -> str:
        details = "; ".join(
            f"{'.'.join(str(part) for part in error.get('loc', ())) or '(arguments)'}: "
            f"{error.get('msg', '')}"
            for error in self.errors
        )
        return f"invalid arguments for job {self.job_name!r}: {details}"


class IdempotencyKeyReusedError(JobArgumentsError):
    """An idempotency key that a job of this name holds was given again with other arguments
    (a client that reused its `Idempotency-Key` for a different request). Nothing is written.

    `job_id` is the job that holds the key, `idempotency_key` the key. It is a
    `JobArgumentsError`, so that `job_arguments_error_handler` answers it 422, as Stripe and the
    IETF draft on the `Idempotency-Key` header do: `errors` holds one error, of type
    `idempotency_key_reused`, that names neither the job nor the key.
    """

    def __init__(self, job_name: str, job_id: int, idempotency_key: str) -> None:
        self.job_id = job_id
        self.idempotency_key = idempotency_key
        # What a client is shown (`job_arguments_error_handler`): not the job, nor the key.
        msg = (
            "this idempotency key was used before with different arguments: a retry must send "
            "the same ones, and a new request needs a new key"
        )
        super().__init__(job_name, [{"loc": (), "msg": msg, "type": "idempotency_key_reused"}])

    def _message(self) -> str:
        return (
            f"idempotency key {self.idempotency_key!r} of job {self.job_name!r} is held by job "
            f"{self.job_id}, enqueued with different arguments; a retry must repeat the "
            "arguments of the first try, and a new request needs a new key"
        )


class JobDefinitionError(StarletteJobsError, ValueError):
    """A `@job` declaration or a per-call option is invalid (bad name, queue, priority...)."""


class ScheduleDefinitionError(JobDefinitionError):
    """A `@periodic` declaration is invalid: a cron expression cronsim cannot read, a time zone
    the system's database does not know, a policy out of its choices, arguments the job refuses,
    or a second schedule of one job without a distinct `name`. Raised at declaration (import)."""


class WorkflowDefinitionError(JobDefinitionError):
    """A workflow that cannot run as declared (docs/workflows.md): a step waiting for one that
    is not in it, steps waiting for each other in a cycle, two steps of one name. Raised before
    anything is written."""


class StepNotRunningError(StarletteJobsError, RuntimeError):
    """`current_job().extend_workflow().enqueue()`: the attempt no longer holds its job's lease
    (it ran past it, and another worker may run the step now), or was asked to stop (a cancel of
    the step or of its workflow), so it cannot add steps to the workflow; nothing was added.
    The worker stops such an attempt anyway."""


class UnstorableResultError(StarletteJobsError, ValueError):
    """A workflow's step returned a value that cannot be stored as its result (not JSON, a
    serializer that raised, what PostgreSQL refuses, over 1 MiB): the attempt fails, and is
    retried by the job's policy, since the steps waiting for it need that result
    (docs/workflows.md). A job of no workflow succeeds without its result instead."""


class UpstreamStepError(StarletteJobsError, LookupError):
    """`current_job().upstream_result`: the step named is not one this step waits for, did not
    succeed, or its result does not fit the type asked for."""


class LeaseLostError(StarletteJobsError, RuntimeError):
    """`current_job().complete_in` could not write the job's success: this attempt no longer
    holds its job. Its lease expired and the job was rescued (another attempt may run it), an
    operator released it, it was completed already (`complete_in` called twice, or its
    transaction committed before), or the job runs outside a worker (called inline, or with a
    `RunningJob` made by hand). Nothing of the completion was written; raised inside the
    caller's transaction, it makes that transaction fail, so nothing of it is written either
    (docs/transactions.md)."""


class UnknownJobError(StarletteJobsError, LookupError):
    """No job with this name is registered in this process.

    Import the module that defines it before enqueueing by name or starting the worker.
    """


class JobNotFoundError(StarletteJobsError, LookupError):
    """No job row has this id."""


class UniqueKeyTakenError(StarletteJobsError):
    """The job cannot be retried: another live (pending or running) job holds its unique key."""


class NotStartedError(StarletteJobsError, RuntimeError):
    """`Jobs` was used before it was started.

    Enter it with `async with jobs:` or pass `jobs.lifespan` to `Starlette(lifespan=...)`.
    """


class EmbeddedPostgresUnavailable(StarletteJobsError, RuntimeError):
    """No database was configured and the embedded PostgreSQL extra is not installed."""


class DatabaseUnavailableError(StarletteJobsError, ConnectionError):
    """PostgreSQL could not be reached, or stopped answering, during a call.

    Raised by `enqueue` and the other calls of `Jobs` instead of hanging or leaking the
    driver's own exception. When it is raised before the statement reached the server (the
    usual case: connection refused, server restarting), nothing was written; when the
    connection dropped while the statement ran, the job may have been stored: give it a
    `unique_key` to make enqueueing again safe.
    """


class DatabaseTooSlowError(DatabaseUnavailableError):
    """PostgreSQL is there but did not finish a statement in time: it ran past the statement
    timeout (blocked by a lock, or too large), or a lock could not be had.

    Not exported: callers see a `DatabaseUnavailableError`; the worker sends a batch that
    raised it again in halves, where the same batch whole would run out of time again.
    """


class unavailable_as_error:  # lower case: used like the context-manager function it was
    """Names `action` in a `DatabaseUnavailableError` raised in the block ("could not get job
    5: ..."), of the same class. The stores raise it; this only says what the caller was doing.

    A class rather than a generator: every enqueue enters one, and this costs a third as much.
    """

    __slots__ = ("_action",)

    def __init__(self, action: str) -> None:
        self._action = action

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if isinstance(error, DatabaseUnavailableError):
            raise while_doing(self._action, error) from error


def while_doing(action: str, error: DatabaseUnavailableError) -> DatabaseUnavailableError:
    """`error` again, of the same class, its message saying that it made `action` fail."""
    return type(error)(f"could not {action}: {error}")


class SchemaVersionError(StarletteJobsError, RuntimeError):
    """The database's schema is not the one this code knows: migrated by a newer release of
    starlette-jobs (upgrade this one), or not migrated yet (run `starlette-jobs migrate`)."""


class ConfigurationError(StarletteJobsError, ValueError):
    """The database settings cannot work: a DSN that is not a PostgreSQL URL, an unknown host,
    a database or role that does not exist, a wrong password.

    Raised when `Jobs` starts, whether or not `require_database` is set: waiting would not fix
    it. The message names the mistake and the DSN, its password masked.
    """


class MemoryStoreUnsupportedError(StarletteJobsError, NotImplementedError):
    """What only PostgreSQL can do was asked of the in-memory store (`Jobs("memory://")`):
    joining a caller's transaction, serving several processes. Test that code on PostgreSQL."""


class OnSuccessError(StarletteJobsError, RuntimeError):
    """`configure(on_success=True)` was used outside a request that `OnSuccessMiddleware`
    watches, or after the request's response started, or for another database than the jobs
    the request holds already (they are written in one transaction)."""


class JobFailedError(StarletteJobsError):
    """`jobs.result` waited for a job that failed for good: its attempts ran out, or it raised
    an error declared non-retryable.

    `record` is the finished job (`record.errors` holds every attempt's error) and `last_error`
    the traceback of its last attempt.
    """

    def __init__(self, record: JobRecord) -> None:
        self.record = record
        self.last_error = record.last_error
        super().__init__(
            f"job {record.id} ({record.name}) failed after {record.attempts} attempt(s): "
            f"{last_line(record.last_error) or '(no error recorded)'}"
        )


class JobCancelledError(StarletteJobsError):
    """`jobs.result` waited for a job that was cancelled (`jobs.cancel`).

    `record` is the finished job: what the job returned when it caught the cancellation, if
    anything, is `record.result`, unvalidated. `last_error` is the last failed attempt's error,
    if one failed before.
    """

    def __init__(self, record: JobRecord) -> None:
        self.record = record
        self.last_error = record.last_error
        super().__init__(f"job {record.id} ({record.name}) was cancelled")


class JobResultError(StarletteJobsError, ValueError):
    """`jobs.result`: the stored result of a succeeded job does not validate against the job's
    return annotation (the function's return type changed since it ran, or its value could not
    be stored as JSON and was kept as null). `record` is the job; `errors` pydantic's list."""

    def __init__(self, record: JobRecord, errors: list[dict[str, Any]]) -> None:
        self.record = record
        self.errors = errors
        details = "; ".join(str(error.get("msg", "")) for error in errors)
        super().__init__(
            f"the result of job {record.id} ({record.name}) does not match its return type: "
            f"{details}"
        )


def last_line(error: str | None) -> str:
    """What a stored error says, without its traceback: its last line that is not blank (the
    exception and its message; a traceback's first line is the same for every error). "" for
    none. The one summary of an error that the exceptions, the CLI and the dashboard show."""
    lines = [line for line in (error or "").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""
