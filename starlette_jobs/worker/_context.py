"""`current_job()`: what a running job can know about itself (id, attempt, ...), whether it was
asked to stop, and where it reports its progress."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, overload
from uuid import UUID

from .._added_steps import AddedSteps
from .._attempt_records import Claim
from .._records import JobStatus
from .._storable import MAX_PROGRESS_BYTES, storable_json
from . import _completion, _steps, _upstream
from ._completion import Completer
from ._loop_time import JobLoopTime
from ._steps import StepStore
from ._threads import JobThreads
from ._upstream import UpstreamReader

if TYPE_CHECKING:
    from .._job import Job
    from ..postgres._transactions import CallerTransaction

T = TypeVar("T")


class AttemptControl:
    """What the worker and one attempt's code share. A sync job reads it from its thread: the
    flags are plain attributes, set only on the event loop's thread, and a read of one sees
    either value whole (a `threading.Event` per attempt cost a tenth of a worker's CPU time
    per job).

    The progress the job reports, as JSON text, goes to `progress(job id, lease token, text)`
    (the worker's progress writer) once the attempt knows its claim, else to `report(text)`;
    with neither, it is dropped. The worker hands over its writer's method rather than a
    `functools.partial` of it per attempt, which few attempts would ever call.
    """

    __slots__ = (
        "_job",
        "cancel_requested",
        "claim",
        "complete",
        "completed",
        "error_type",
        "loop_time",
        "progress",
        "report",
        "started",
        "steps",
        "stopped_by_worker",
        "threads",
        "timed_out",
        "upstream",
    )

    def __init__(
        self,
        report: Callable[[str], None] | None = None,
        loop_time: JobLoopTime | None = None,
        # Not keyword-only: the worker makes one per attempt, by position, where keywords
        # cost 0.2 us more.
        claim: Claim | None = None,
        progress: Callable[[int, UUID, str], None] | None = None,
        upstream: UpstreamReader | None = None,
        complete: Completer | None = None,
        steps: StepStore | None = None,
        threads: JobThreads | None = None,
    ) -> None:
        self.cancel_requested = False
        """`jobs.cancel` asked the job to stop."""
        self.error_type: str | None = None
        """The class of the exception that failed the attempt, for its metrics."""
        self.report = report
        self.claim = claim
        """The job this attempt runs (`run_attempt` sets it): what `current_job()` describes."""
        self.progress = progress
        self.upstream = upstream
        """Where a workflow's step reads the steps it waited for (`Store.upstream_results`)."""
        self.complete = complete
        """Where the job writes its own success (`Store.complete_job`; None: no worker)."""
        self.completed = False
        """`complete_in` wrote the attempt's success (committed, unless its transaction rolls
        back): the worker records no outcome of its own for an attempt that then returns."""
        self.steps = steps
        """The store, for what a workflow's step asks of it beyond its outcome."""
        self.threads = threads
        """Where the worker counts its sync jobs' threads (None: no worker, no count)."""
        self._job: RunningJob | None = None
        self.loop_time = loop_time
        """Where the worker counts how long its jobs hold the event loop (None: it does not)."""
        self.stopped_by_worker = False
        """The worker cancelled the attempt for itself (shutdown, a lost lease): no outcome."""
        self.timed_out = False
        """The job ran past its `timeout`: the attempt failed, whatever its thread does next."""
        self.started = False
        """The attempt's task took its first step. Until then, cancelling the task would
        close its coroutine unstarted, skipping the attempt's own clean-up: a stop that comes
        earlier is only marked here, and the attempt looks at the marks as it starts."""

    def request_cancel(self) -> bool:
        """Marks the attempt as asked to stop; False if it was already."""
        if self.cancel_requested:
            return False
        self.cancel_requested = True
        return True

    def report_progress(self, text: str) -> None:
        """The job reported `text` (JSON): to the worker's writer, or to `report`."""
        claim, progress = self.claim, self.progress
        if claim is not None and progress is not None:
            progress(claim.id, claim.lease_token, text)
        elif self.report is not None:
            self.report(text)

    def running_job(self) -> RunningJob | None:
        """What `current_job()` returns in this attempt: made the first time the job asks,
        then the same object; most jobs never ask, and a `RunningJob` per attempt cost
        0.7 us of the worker's time per job. None until the attempt knows its claim."""
        job = self._job
        if job is None:
            claim = self.claim
            if claim is None:
                return None
            job = self._job = RunningJob(
                claim.id, claim.name, claim.queue, claim.attempts, claim.max_attempts,
                scheduled_for=claim.scheduled_for, _control=self,
            )  # fmt: skip
        return job

    def in_thread(self, func: Callable[..., T]) -> Callable[..., T]:
        """`func`, a sync job's, as its thread runs it: among the job threads shutdown counts
        (`_threads.py`), and counted by the worker's loop-time counter if there is one."""
        counted = func if self.loop_time is None else self.loop_time.counting_thread(func)
        return counted if self.threads is None else self.threads.tracked(counted)

    @property
    def stop_requested(self) -> bool:
        """Whether the attempt should stop, for any reason: a cancel request, a timeout, the
        worker's shutdown or a lost lease. What a sync job sees as `cancel_requested`."""
        return self.cancel_requested or self.stopped_by_worker or self.timed_out


@dataclass(frozen=True, slots=True)
class RunningJob:
    """The job whose code is running now, as `current_job()` returns it."""

    id: int
    name: str
    queue: str
    attempt: int
    """1 on the first run, 2 on the first retry, ..."""
    max_attempts: int
    scheduled_for: datetime | None = field(default=None, kw_only=True)
    """The tick a schedule enqueued this job for (`@periodic`); None for a job enqueued
    otherwise. A tick caught up after the workers were stopped runs later than this."""
    _control: AttemptControl = field(
        default_factory=AttemptControl, repr=False, compare=False, kw_only=True
    )

    @property
    def cancel_requested(self) -> bool:
        """Whether this attempt should stop: `jobs.cancel` asked, or the worker gave the
        attempt up (it ran past its `timeout`, the worker is shutting down past its grace
        period, or it lost the job's lease and another worker may run it now). An `async def`
        job is also cancelled (it gets `asyncio.CancelledError`); a plain `def` job runs in a
        thread, which cannot be interrupted: it should check this now and then, and return
        early. Only a `jobs.cancel` request makes the job end `cancelled`; after a timeout the
        attempt has failed already, and what a given-up attempt returns is not recorded.

        Example:
            >>> @job
            ... def crunch(rows: int) -> dict[str, int]:
            ...     done = 0
            ...     while done < rows and not current_job().cancel_requested:
            ...         done += 1
            ...     return {"done": done}
        """
        return self._control.stop_requested

    def report_progress(self, value: object) -> None:
        """Reports how far the job got: any JSON value (a fraction, counts, a stage name). The
        latest value is readable as `JobRecord.progress` while the job runs; values reported
        faster than they are written replace each other (see docs/progress.md). Safe to call
        from a sync job's thread.

        Raises:
            ValueError: `value` is not JSON, is more than 64 KiB of it (the message says how
                much), or holds what PostgreSQL cannot store (a NUL, a lone surrogate, nesting
                deeper than 64 levels, an integer of more than 4,300 digits, NaN or infinity);
                the message says where. Nothing is reported then: the last value stands.

        Example:
            >>> @job
            ... async def import_rows(total: int) -> None:
            ...     for done in range(total):
            ...         current_job().report_progress({"done": done + 1, "total": total})
        """
        try:
            text = storable_json(value, MAX_PROGRESS_BYTES).decode()
        except ValueError as error:
            raise ValueError(f"job {self.id}: progress not storable: {error}") from None
        self._control.report_progress(text)

    async def upstream_result(self, step: str, result_type: type[T]) -> T:
        """A workflow's step: the result of `step`, one of the steps it waited for, validated
        into `result_type` (what that step's job returns), see docs/workflows.md.

        Raises:
            UpstreamStepError: `step` is not one it waited for, did not succeed, or its
                result does not fit `result_type`.

        Example:
            >>> @job
            ... async def send_invoice(order_id: int) -> None:
            ...     pdf = await current_job().upstream_result("render", RenderedPdf)
        """
        return await _upstream.upstream_result(self._control.upstream, self.id, step, result_type)

    async def upstream_results(self, result_type: type[T]) -> dict[str, T]:
        """A workflow's step: the results of the steps it waited for that succeeded, by step
        name, each validated into `result_type` (a fan-in's collecting step)."""
        return await _upstream.upstream_results(self._control.upstream, self.id, result_type)

    @overload
    async def complete_in(
        self,
        connection: CallerTransaction | None,
        job: Job[..., Coroutine[Any, Any, T]],
        result: T,
    ) -> None: ...

    @overload
    async def complete_in(
        self, connection: CallerTransaction | None, job: Job[..., T], result: T
    ) -> None: ...

    async def complete_in(
        self, connection: CallerTransaction | None, job: Job[..., Any], result: object
    ) -> None:
        """Writes this attempt's success, with `result` (of the type `job` returns), in the
        transaction of `connection`: the job's own writes, its result, its `succeeded` event
        and the release of the workflow steps waiting for it commit together, or not at all.
        The worker then records nothing of its own for the attempt: what the job returns is
        not written again. See docs/transactions.md.

        Args:
            connection: an asyncpg connection, or a SQLAlchemy `AsyncSession` or
                `AsyncConnection` on asyncpg, in the transaction that does the job's work (as
                `configure(connection=...)` takes it); None: written at once, on the store's
                own connection (the in-memory store takes only None).
            job: the job whose code this is (`@job`): the type of `result` is checked by it.
            result: what the job returns, stored as its result.

        Raises:
            LeaseLostError: the attempt no longer holds its job (its lease expired and it was
                rescued, it was released, it was completed already), or no worker runs it:
                nothing was written, and the error makes the transaction fail.
            ValueError: `result` cannot be stored (as for `report_progress`); nothing written.

        Example:
            >>> @job
            ... async def charge(order_id: int) -> str:
            ...     async with pool.acquire() as connection, connection.transaction():
            ...         await connection.execute("INSERT INTO charges VALUES ($1)", order_id)
            ...         await current_job().complete_in(connection, charge, "charged")
            ...     return "charged"
        """
        control = self._control
        await _completion.complete(
            control.complete, control.claim, self.name, connection, job, result
        )
        control.completed = True

    def extend_workflow(self) -> AddedSteps:
        """A workflow's step: a builder of steps to add to its own workflow while it runs (a
        fan-out over a list it just fetched), declared as on a `Workflow` (`add`, `after`,
        `add_many`, `chain`; they may wait for each other only), written by `await
        builder.enqueue()`. The steps waiting for this one wait for the added steps too, and
        read their results; see docs/workflows.md.

        Example:
            >>> @job
            ... async def fetch_orders(day: str) -> int:
            ...     orders = await list_orders(day)
            ...     more = current_job().extend_workflow()
            ...     more.add_many("order", bill_order, [{"order_id": o} for o in orders])
            ...     await more.enqueue()
            ...     return len(orders)
        """
        return _steps.added_steps(self._control.steps, self.id, self._control.claim)

    async def upstream_statuses(self) -> dict[str, JobStatus]:
        """A workflow's step: how each step it waited for ended, by step name (for a step of
        `after(always=True)` or `after(at_least=...)`)."""
        return await _upstream.upstream_statuses(self._control.upstream, self.id)


# An attempt of the worker's sets its `AttemptControl`, whose `RunningJob` is made only if the
# job asks for it; `running(job)` with a `RunningJob` (in tests) sets that job itself. The
# worker sets and resets it directly, without `running`: two calls less per attempt.
CURRENT_JOB: ContextVar[RunningJob | AttemptControl | None] = ContextVar(
    "starlette_jobs_current_job", default=None
)


def current_job() -> RunningJob | None:
    """The job running in this task, or None outside a job (e.g. when called inline).

    Example:
        >>> @job(retry=Retry.fixed(max_attempts=3, delay=1))
        ... async def sync_crm(email: str) -> None:
        ...     if current_job().attempt < 3:
        ...         raise ConnectionError("CRM unavailable")
    """
    current = CURRENT_JOB.get()
    if isinstance(current, AttemptControl):
        return current.running_job()
    return current


class running:  # lower case: used like the context-manager function it was
    """Makes `job` the current job for the duration of the block (an attempt's control: the
    job of its claim). A class rather than a generator: the worker enters one per attempt, and
    this costs a third as much."""

    __slots__ = ("_job", "_token")
    _token: Token[RunningJob | AttemptControl | None]

    def __init__(self, job: RunningJob | AttemptControl) -> None:
        self._job = job

    def __enter__(self) -> None:
        self._token = CURRENT_JOB.set(self._job)

    def __exit__(self, *exc_info: object) -> None:
        CURRENT_JOB.reset(self._token)
