"""The `@job` decorator and the `Job` object: declaration, argument validation, per-call options."""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Generic, ParamSpec, Protocol, TypeVar, overload

from annotated_types import Interval

from ._arguments import ArgumentsSchema
from ._errors import JobArgumentsError, JobDefinitionError, NotStartedError, UnknownJobError
from ._retry import Retry
from ._storable import MAX_DELAY, MAX_UNIQUE_KEY_LENGTH, unstorable

if TYPE_CHECKING:  # only a type: the driver is imported by _connections alone
    from ._connections import Connection

P = ParamSpec("P")
R = TypeVar("R")

JobId = Annotated[int, Interval(ge=1, le=2**63 - 1)]
"""What `enqueue` returns and `Jobs.get` takes: an `int` to a type checker; treat it as opaque.

As an annotation it also says what can be a job's id, so pydantic refuses anything else: a
FastAPI path parameter `job_id: JobId` answers 422 for `abc`, `0` or a number past 64 bits."""

_NAME_PATTERN = re.compile(r"[A-Za-z0-9_.:<>-]{1,200}")
_QUEUE_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,48}")
_PRIORITY_RANGE = range(-(2**31), 2**31)


def check_queue_name(queue: str) -> str:
    """Queue names become part of a LISTEN channel name, so they are short and plain."""
    if not isinstance(queue, str) or not _QUEUE_PATTERN.fullmatch(queue):
        raise JobDefinitionError(
            f"invalid queue name {queue!r}: use 1 to 48 letters, digits, '_', '.' or '-'"
        )
    return queue


def _check_job_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME_PATTERN.fullmatch(name):
        raise JobDefinitionError(
            f"invalid job name {name!r}: use 1 to 200 letters, digits or any of _ . : < > -"
        )
    return name


def _check_priority(priority: int) -> int:
    # A bool is an int to Python, and almost certainly a mistake here.
    if type(priority) is not int or priority not in _PRIORITY_RANGE:
        raise JobDefinitionError(f"priority must be a 32-bit integer, got {priority!r}")
    return priority


@dataclass(frozen=True, slots=True)
class EnqueueOptions:
    """Per-call options; see `Job.configure`."""

    delay: float | None = None
    run_at: datetime | None = None
    priority: int | None = None
    queue: str | None = None
    unique_key: str | None = None
    connection: Connection | None = None

    def __post_init__(self) -> None:
        if self.delay is not None and self.run_at is not None:
            raise JobDefinitionError("give either delay or run_at, not both")
        if self.delay is not None:
            check_seconds("delay", self.delay)
        if self.run_at is not None:
            _check_run_at(self.run_at)
        if self.priority is not None:
            _check_priority(self.priority)
        if self.queue is not None:
            check_queue_name(self.queue)
        if self.unique_key is not None:
            _check_unique_key(self.unique_key)


def check_seconds(name: str, seconds: float, *, zero: bool = True) -> float:
    """A number of seconds for a delay or a timeout: finite, within `MAX_DELAY`, and >= 0
    (> 0 unless `zero`)."""
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not (0 <= seconds <= MAX_DELAY)
        or (seconds == 0 and not zero)
    ):
        raise JobDefinitionError(
            f"{name} must be a finite number of seconds {'>=' if zero else '>'} 0 and at most "
            f"{MAX_DELAY:.0f} (10 years), got {seconds!r}"
        )
    return seconds


def _check_run_at(run_at: datetime) -> None:
    if not isinstance(run_at, datetime) or run_at.utcoffset() is None:
        raise JobDefinitionError("run_at must be timezone-aware (e.g. datetime.now(timezone.utc))")
    try:
        in_utc = run_at.astimezone(UTC)
    except OverflowError:
        in_utc = None
    # asyncpg stores datetime.max and datetime.min as infinity, which never comes due.
    if in_utc is None or not (datetime.min < in_utc.replace(tzinfo=None) < datetime.max):
        raise JobDefinitionError(
            f"run_at must lie between years 1 and 9999 in UTC, got {run_at.isoformat()}"
        )


def _check_unique_key(unique_key: str) -> None:
    if not isinstance(unique_key, str) or not 1 <= len(unique_key) <= MAX_UNIQUE_KEY_LENGTH:
        raise JobDefinitionError(
            f"unique_key must be 1 to {MAX_UNIQUE_KEY_LENGTH} characters, got "
            f"{len(unique_key) if isinstance(unique_key, str) else unique_key!r}"
        )
    reason = unstorable(unique_key)
    if reason is not None:
        raise JobDefinitionError(f"unique_key {reason}")


class Enqueuer(Protocol):
    """What a `Job` needs to write rows: `_enqueue.Enqueuer`, which a started `Jobs` owns."""

    async def insert(
        self, job: Job[Any, Any], payloads: list[str], options: EnqueueOptions
    ) -> list[JobId]: ...


class HasEnqueuer(Protocol):
    """A `Jobs`, as `configure(jobs=...)` takes it: it hands down its enqueuer once started."""

    @property
    def _ready_enqueuer(self) -> Enqueuer: ...


# The enqueuers of the `Jobs` started in this process, most recent last. `job.enqueue` writes
# through the most recent one; `configure(jobs=...)` names a `Jobs` explicitly.
_started: list[Enqueuer] = []


def started_enqueuer() -> Enqueuer:
    if not _started:
        raise NotStartedError(
            "no Jobs instance is started in this process: use `async with jobs:`, "
            "`Starlette(lifespan=jobs.lifespan)`, or call `jobs.enqueue(job, ...)`"
        )
    return _started[-1]


_registry: dict[str, Job[Any, Any]] = {}


def registered_jobs() -> list[Job[Any, Any]]:
    """Every job declared in this process."""
    return list(_registry.values())


def registered_job(name: str) -> Job[Any, Any]:
    """The job registered under `name` in this process."""
    try:
        return _registry[name]
    except KeyError:
        raise UnknownJobError(
            f"no job named {name!r} is registered in this process; import the module that "
            "declares it with @job before the worker starts"
        ) from None


class Job(Generic[P, R]):
    """A function declared with `@job`: call it to run inline, `enqueue` it to run in a worker."""

    def __init__(
        self,
        func: Callable[P, R],
        *,
        name: str,
        queue: str,
        retry: Retry,
        timeout: float | None,
        priority: int,
        non_retryable: tuple[type[BaseException], ...],
    ) -> None:
        if timeout is not None:
            check_seconds("timeout", timeout, zero=False)
        self.func = func
        self.name = _check_job_name(name)
        self.queue = check_queue_name(queue)
        self.retry = retry
        self.timeout = timeout
        self.priority = _check_priority(priority)
        self.non_retryable = non_retryable
        self.is_async = inspect.iscoroutinefunction(func)
        self._arguments = ArgumentsSchema(func, self.name)
        self.__doc__ = func.__doc__
        self.__wrapped__ = func

    def __repr__(self) -> str:
        return f"<Job {self.name} queue={self.queue!r}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run the function here and now, as if it had not been decorated."""
        return self.func(*args, **kwargs)

    def configure(
        self,
        *,
        delay: float | None = None,
        run_at: datetime | None = None,
        priority: int | None = None,
        queue: str | None = None,
        unique_key: str | None = None,
        connection: Connection | None = None,
        jobs: HasEnqueuer | None = None,
    ) -> ConfiguredJob[P, R]:
        """Options for one enqueue call, kept apart from the job's own arguments.

        Args:
            delay: seconds from now (database time) before the job may run.
            run_at: a timezone-aware instant before which the job does not run.
            priority: overrides the job's priority; higher runs first.
            queue: overrides the job's queue.
            unique_key: while a pending or running job holds this key, enqueueing another with
                the same key writes nothing and returns the live job's id.
            connection: an asyncpg connection whose transaction the insert joins, so the job
                exists only if that transaction commits.
            jobs: the `Jobs` instance to write through (default: the one started last).

        Example:
            >>> await send_welcome.configure(delay=60).enqueue(user_id=1, email="a@b.c")
        """
        options = EnqueueOptions(delay, run_at, priority, queue, unique_key, connection)
        return ConfiguredJob(self, options, jobs)

    async def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> JobId:
        """Validate the arguments, write the job, and return its id.

        Raises:
            JobArgumentsError: the arguments do not fit the function's signature; nothing is
                written.
        """
        return await enqueue_one(self, args, kwargs, NO_OPTIONS, None)

    async def enqueue_many(self, items: Iterable[Mapping[str, Any]]) -> list[JobId]:
        """Enqueue one job per mapping of keyword arguments, in one round trip.

        Every item is validated first: one invalid item refuses the whole batch.
        """
        return await ConfiguredJob(self, NO_OPTIONS, None).enqueue_many(items)

    def _serialize_arguments(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
        """The validated arguments as the JSON text stored in the row."""
        return self._arguments.serialize(args, kwargs)

    def _parse_arguments(self, payload: str) -> dict[str, Any]:
        """The stored JSON validated back into the function's own types, as keyword arguments."""
        return self._arguments.parse(payload)

    async def _run(self, kwargs: dict[str, Any]) -> Any:
        """Await the function with already-validated arguments (sync functions run in a thread)."""
        # No typing.cast here: it would build a generic alias on every attempt.
        func: Any = self.func
        if self.is_async:
            return await func(**kwargs)
        return await asyncio.to_thread(func, **kwargs)


NO_OPTIONS = EnqueueOptions()


async def enqueue_one(
    job: Job[Any, Any],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    options: EnqueueOptions,
    jobs: HasEnqueuer | None,
) -> JobId:
    """The one way a single job is enqueued (`job.enqueue`, `configure(...).enqueue`,
    `jobs.enqueue`): its arguments validated into JSON (before anything else: bad input is
    refused even with no database), then written by `jobs` (None: the `Jobs` started last)."""
    payload = job._arguments.serialize(args, kwargs)
    enqueuer = started_enqueuer() if jobs is None else jobs._ready_enqueuer
    (job_id,) = await enqueuer.insert(job, [payload], options)
    return job_id


class ConfiguredJob(Generic[P, R]):
    """A job with per-call options, from `Job.configure`."""

    def __init__(self, job: Job[P, R], options: EnqueueOptions, jobs: HasEnqueuer | None) -> None:
        self.job = job
        self.options = options
        self._jobs = jobs

    def _enqueuer(self) -> Enqueuer:
        return started_enqueuer() if self._jobs is None else self._jobs._ready_enqueuer

    async def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> JobId:
        """See `Job.enqueue`."""
        return await enqueue_one(self.job, args, kwargs, self.options, self._jobs)

    async def enqueue_many(self, items: Iterable[Mapping[str, Any]]) -> list[JobId]:
        """See `Job.enqueue_many`."""
        if self.options.unique_key is not None:
            raise JobDefinitionError(
                "unique_key names one job; it cannot be shared by the jobs of enqueue_many"
            )
        items = list(items)
        if not items:
            return []
        payloads = self.job._arguments.serialize_batch(items)
        if payloads is None:
            payloads = []
            for index, item in enumerate(items):
                try:
                    payloads.append(self.job._serialize_arguments((), item))
                except JobArgumentsError as error:
                    located = [{**e, "loc": (index, *e.get("loc", ()))} for e in error.errors]
                    raise JobArgumentsError(self.job.name, located) from None
        return await self._enqueuer().insert(self.job, payloads, self.options)


@overload
def job(func: Callable[P, R], /) -> Job[P, R]: ...


@overload
def job(
    *,
    name: str | None = None,
    queue: str = "default",
    retry: Retry | None = None,
    timeout: float | None = None,
    priority: int = 0,
    non_retryable: tuple[type[BaseException], ...] = (),
) -> Callable[[Callable[P, R]], Job[P, R]]: ...


def job(
    func: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    queue: str = "default",
    retry: Retry | None = None,
    timeout: float | None = None,
    priority: int = 0,
    non_retryable: tuple[type[BaseException], ...] = (),
) -> Job[P, R] | Callable[[Callable[P, R]], Job[P, R]]:
    """Declare a background job.

    Args:
        name: what is stored in the row and looked up by the worker; default `module.qualname`.
        queue: the queue it runs on by default.
        retry: the retry policy; default `Retry.exponential()`.
        timeout: seconds an attempt may run before it is cancelled and counted as failed.
        priority: higher runs first among due jobs of one queue.
        non_retryable: exception types after which the job fails at once, whatever the policy.

    Example:
        >>> @job(queue="emails", retry=Retry.fixed(max_attempts=3, delay=10))
        ... async def send_welcome(user_id: int, email: str) -> None: ...
        >>> job_id = await send_welcome.enqueue(user_id=42, email="ada@example.com")
    """

    def decorate(function: Callable[P, R]) -> Job[P, R]:
        job_name = f"{function.__module__}.{function.__qualname__}" if name is None else name
        declared = Job(
            function,
            name=job_name,
            queue=queue,
            retry=retry or Retry.exponential(),
            timeout=timeout,
            priority=priority,
            non_retryable=non_retryable,
        )
        _register(declared)
        return declared

    return decorate(func) if func is not None else decorate


def _register(declared: Job[Any, Any]) -> None:
    existing = _registry.get(declared.name)
    if existing is not None and _origin(existing.func) != _origin(declared.func):
        raise JobDefinitionError(
            f"two different functions are declared as job {declared.name!r} "
            f"({_origin(existing.func)} and {_origin(declared.func)}); give one a distinct name="
        )
    # Re-declaring the same function (a module reloaded, a test redefining a local job) replaces it.
    _registry[declared.name] = declared


def _origin(func: Callable[..., Any]) -> str:
    return f"{func.__module__}.{getattr(func, '__qualname__', repr(func))}"
