"""The `@job` decorator and the `Job` object: declaration, argument validation, per-call options."""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Generic, ParamSpec, Protocol, TypeVar, overload

from annotated_types import Interval

from ._arguments import ArgumentsSchema
from ._errors import JobArgumentsError, JobDefinitionError, NotStartedError, UnknownJobError
from ._options import NO_OPTIONS as NO_OPTIONS
from ._options import EnqueueOptions as EnqueueOptions
from ._options import check_priority, check_seconds
from ._options import check_queue_name as check_queue_name
from ._retry import Retry

if TYPE_CHECKING:  # only a type: the driver is imported by _connections alone
    from ._workflow_records import EnqueuedWorkflow, NewWorkflow
    from .postgres._transactions import CallerTransaction

P = ParamSpec("P")
R = TypeVar("R")

JobId = Annotated[int, Interval(ge=1, le=2**63 - 1)]
"""What `enqueue` returns and `Jobs.get` takes: an `int` to a type checker; treat it as opaque.

As an annotation it also says what can be a job's id, so pydantic refuses anything else: a
FastAPI path parameter `job_id: JobId` answers 422 for `abc`, `0` or a number past 64 bits."""

_NAME_PATTERN = re.compile(r"[A-Za-z0-9_.:<>-]{1,200}")


def _check_job_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME_PATTERN.fullmatch(name):
        raise JobDefinitionError(
            f"invalid job name {name!r}: use 1 to 200 letters, digits or any of _ . : < > -"
        )
    return name


class Enqueuer(Protocol):
    """What a `Job` needs to write rows: `_enqueue.Enqueuer`, which a started `Jobs` owns."""

    async def insert(
        self, job: Job[Any, Any], payloads: list[str], options: EnqueueOptions
    ) -> list[JobId]: ...

    async def insert_workflow(
        self, new: NewWorkflow, connection: CallerTransaction | None
    ) -> EnqueuedWorkflow: ...


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
_names: tuple[str, ...] | None = None  # `registered_names()`, until a job is declared


def registered_jobs() -> list[Job[Any, Any]]:
    """Every job declared in this process."""
    return list(_registry.values())


def registered_names() -> tuple[str, ...]:
    """The names of every job declared in this process, sorted: the same tuple object until a
    job is declared, so that a caller can tell a change by identity (deploy-aware claiming
    reads it before every claim)."""
    global _names
    if _names is None:
        _names = tuple(sorted(_registry))
    return _names


def is_registered(name: str) -> bool:
    """Whether a job named `name` is declared in this process."""
    return name in _registry


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
        self.priority = check_priority(priority)
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
        connection: CallerTransaction | None = None,
        jobs: HasEnqueuer | None = None,
        idempotency_key: str | None = None,
        on_success: bool = False,
    ) -> ConfiguredJob[P, R]:
        """Options for one enqueue call, kept apart from the job's own arguments.

        Args:
            delay: seconds from now (database time) before the job may run.
            run_at: a timezone-aware instant before which the job does not run.
            priority: overrides the job's priority; higher runs first.
            queue: overrides the job's queue.
            unique_key: while a pending or running job holds this key, enqueueing another with
                the same key writes nothing and returns the live job's id.
            connection: an asyncpg connection, or a SQLAlchemy `AsyncSession` or
                `AsyncConnection` on asyncpg, whose transaction the insert joins, so the job
                exists only if that transaction commits.
            jobs: the `Jobs` instance to write through (default: the one started last).
            idempotency_key: like `unique_key`, for jobs of this name, but held for as long as
                the job is kept (until `retention` prunes it), whatever its status; see
                `idempotency_key()` for the `Idempotency-Key` header. Given again with other
                arguments, `enqueue` raises `IdempotencyKeyReusedError` and writes nothing.
            on_success: hold the job until the response of the current request starts, and
                write it then only if its status is below 400 (needs `OnSuccessMiddleware`).
                The id is real already; see docs/requests.md.

        Example:
            >>> await send_welcome.configure(delay=60).enqueue(user_id=1, email="a@b.c")
        """
        options = EnqueueOptions(
            delay, run_at, priority, queue, unique_key, connection, idempotency_key, on_success
        )
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

    async def _run(
        self,
        kwargs: dict[str, Any],
        in_thread: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
    ) -> Any:
        """Await the function with already-validated arguments (sync functions run in a
        thread, as `in_thread` wraps them if given)."""
        # No typing.cast here: it would build a generic alias on every attempt.
        func: Any = self.func
        if self.is_async:
            return await func(**kwargs)
        return await asyncio.to_thread(func if in_thread is None else in_thread(func), **kwargs)


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
        for option in ("unique_key", "idempotency_key"):
            if getattr(self.options, option) is not None:
                raise JobDefinitionError(
                    f"{option} names one job; it cannot be shared by the jobs of enqueue_many"
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
    global _names
    _names = None


def _origin(func: Callable[..., Any]) -> str:
    return f"{func.__module__}.{getattr(func, '__qualname__', repr(func))}"
