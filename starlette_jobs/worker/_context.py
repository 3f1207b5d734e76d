"""`current_job()`: what a running job can know about itself (id, attempt, ...), whether it was
asked to stop, and where it reports its progress."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass, field

from .._storable import MAX_PROGRESS_BYTES, storable_json
from ._loop_time import JobLoopTime


class AttemptControl:
    """What the worker and one attempt's code share. A sync job reads it from its thread: the
    flags are plain attributes, set only on the event loop's thread, and a read of one sees
    either value whole (a `threading.Event` per attempt cost a tenth of a worker's CPU time
    per job).

    `report(text)` takes the progress the job reports, as JSON text (None: dropped).
    """

    __slots__ = (
        "cancel_requested",
        "loop_time",
        "report",
        "started",
        "stopped_by_worker",
        "timed_out",
    )

    def __init__(
        self,
        report: Callable[[str], None] | None = None,
        loop_time: JobLoopTime | None = None,
    ) -> None:
        self.cancel_requested = False
        """`jobs.cancel` asked the job to stop."""
        self.report = report
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
        report = self._control.report
        if report is not None:
            report(text)


_current: ContextVar[RunningJob | None] = ContextVar("starlette_jobs_current_job", default=None)


def current_job() -> RunningJob | None:
    """The job running in this task, or None outside a job (e.g. when called inline).

    Example:
        >>> @job(retry=Retry.fixed(max_attempts=3, delay=1))
        ... async def sync_crm(email: str) -> None:
        ...     if current_job().attempt < 3:
        ...         raise ConnectionError("CRM unavailable")
    """
    return _current.get()


class running:  # lower case: used like the context-manager function it was
    """Makes `job` the current job for the duration of the block. A class rather than a
    generator: the worker enters one per attempt, and this costs a third as much."""

    __slots__ = ("_job", "_token")
    _token: Token[RunningJob | None]

    def __init__(self, job: RunningJob) -> None:
        self._job = job

    def __enter__(self) -> None:
        self._token = _current.set(self._job)

    def __exit__(self, *exc_info: object) -> None:
        _current.reset(self._token)
