"""From a claim to a written outcome: each claimed job runs in a task of its own, and its
outcome goes to the outcome writer.

The claim loops (`_worker.py`) decide what to claim; this decides what happens to each job they
claimed. Everything it tracks belongs to the attempt's lease token (see `_running.py`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from time import perf_counter

from .._attempt_records import Claim
from .._errors import DatabaseUnavailableError
from .._job import is_registered
from .._metrics import Metrics
from .._records import JobStatus
from .._tracing import Tracing
from ..store._protocol import Store
from ._attempt import run_attempt
from ._cancels import AttemptStops
from ._context import AttemptControl
from ._controls import QueueControlsCopy
from ._depths import record_attempt
from ._loop_time import JobLoopTime
from ._outcomes import OutcomeWriter
from ._progress import ProgressWriter
from ._queues import QueueState
from ._running import RunningAttempts
from ._steps import SizedSteps
from ._threads import JobThreads

logger = logging.getLogger("starlette_jobs.worker")


class AttemptLauncher:
    """Starts the claimed jobs and hands each one's outcome to the writer."""

    def __init__(
        self,
        store: Store,
        tracing: Tracing,
        metrics: Metrics,
        running: RunningAttempts[asyncio.Task[None]],
        stops: AttemptStops,
        outcomes: OutcomeWriter,
        progress: ProgressWriter,
        controls: QueueControlsCopy,
        count_ended: Callable[[str, JobStatus], None],
        loop_time: JobLoopTime | None,
        wake: Callable[[str], None],
        max_payload_bytes: int = 1024 * 1024,
        declared_elsewhere: Callable[[str, str], Awaitable[bool]] | None = None,
    ) -> None:
        self._store = store
        self._tracing = tracing
        self._metrics = metrics
        self._running = running
        self._stops = stops
        self._outcomes = outcomes
        self._progress = progress
        self._wake = wake
        self._declared_elsewhere = declared_elsewhere  # see `_stray`
        self._loop_time = loop_time
        # The sync jobs' threads, which shutdown counts (they outlive their attempts' tasks).
        self.threads = JobThreads()
        # Bound once: one attribute lookup less for every attempt.
        self._count_ended = count_ended
        self._after_outcome = controls.after_outcome
        self._report_progress = progress.report
        self._upstream_results = store.upstream_results  # a workflow's step reads them
        self._complete_job = store.complete_job  # a job's `complete_in` writes through it
        self._steps = SizedSteps(store, max_payload_bytes)  # a step adds steps through it
        # Set once the worker stops: a retry's wake-up is not scheduled any more.
        self.stopping = False

    def launch(self, state: QueueState, claims: list[Claim]) -> None:
        """Starts one task per claim, each registered where a stop can reach it."""
        # The loop's own create_task: asyncio.create_task adds a call and a name.
        create_task = asyncio.get_running_loop().create_task
        for claim in claims:
            # report, loop_time, claim, progress, upstream, complete, steps, threads: by
            # position, one per attempt (keywords cost more).
            control = AttemptControl(
                None, self._loop_time, claim, self._report_progress,
                self._upstream_results, self._complete_job, self._steps, self.threads,
            )  # fmt: skip
            self._stops.register(claim.lease_token, control)
            run = self._execute if is_registered(claim.name) else self._stray
            self._running.start(claim, create_task(run(state, claim, control)))

    async def _stray(self, state: QueueState, claim: Claim, control: AttemptControl) -> None:
        """A job of a name this process does not declare, claimed as a stray (`_strays.py`)
        to fail it. Unless a live worker that declares its name registered since this worker
        last looked: given back to it, no attempt counted. It was failed, with "no job named
        ... is registered", during a rolling deploy, for up to a third of a lease after the
        first new worker had started."""
        if self._declared_elsewhere is not None:
            token = claim.lease_token
            control.started = True  # it awaits: a stop meanwhile cancels it (`cancel_started`)
            try:
                elsewhere = await self._declared_elsewhere(claim.queue, claim.name)
                released = elsewhere and await self._store.release_jobs([(claim.id, token)])
            except DatabaseUnavailableError:
                released = False  # cannot tell: it fails, as it would have
            except Exception:  # whatever it is, the attempt must run and end, or it is stuck
                logger.exception("job %s (%s): looking for a worker that declares it failed",
                                 claim.id, claim.name)  # fmt: skip
                released = False
            except BaseException:  # cancelled (shutdown, a lost lock): no attempt ran
                self._forget(claim)
                raise
            if released:
                self._forget(claim)
                logger.info(
                    "job %s (%s): a live worker declares it now; given back to it",
                    claim.id, claim.name,
                )  # fmt: skip
                return
        await self._execute(state, claim, control)

    def _forget(self, claim: Claim) -> None:
        """What the worker keeps of an attempt that will not run (see `_execute`'s finally)."""
        self._stops.forget(claim.lease_token)
        self._running.end(claim)
        self._progress.take(claim.lease_token)

    async def _execute(self, state: QueueState, claim: Claim, control: AttemptControl) -> None:
        token = claim.lease_token
        started = perf_counter() if self._metrics.recording() else None
        try:
            outcome = await run_attempt(claim, self._tracing, control)
        finally:
            self._stops.forget(token)
            self._running.end(claim)
            # The last progress not written yet goes with the outcome, so it is never lost.
            progress = self._progress.take(token)
            if state.may_have_more:
                state.wake.set()
        # A limited queue's workers are told of the room the job leaves, once it is written.
        after = self._after_outcome
        if progress is not None:
            outcome.progress = progress
        if started is not None:
            record_attempt(self._metrics, claim, outcome, perf_counter() - started, control)
        self._count_ended(state.name, outcome.status)
        delay = outcome.retry_delay
        # An attempt that wrote its success in its own transaction (`complete_in`) is written
        # like any other: if that transaction committed, the fence refuses this write, as it
        # should; if it rolled back and the job returned anyway, this is its outcome (not a
        # job left running until its lease ran out).
        completed = control.completed
        if delay is None:
            self._outcomes.add(outcome, after(state.name, None), completed=completed)
        else:
            # Wake when the retry comes due instead of at the next poll. A hint only: any worker
            # may claim it, and the poll still covers a retry whose wake-up is lost.
            wake = functools.partial(self._wake_after, delay, state.name)
            self._outcomes.add(outcome, after(state.name, wake), completed=completed)

    def _wake_after(self, delay: float, queue: str) -> None:
        """Called once a retry's outcome is written. The store counts the delay from that write
        (PostgreSQL's clock), which can be well after the attempt ended: the first write of a
        fresh worker prepares its statement, and a busy worker's outcome waits for the write in
        flight. So the wake-up counts from the reply, which comes after that clock was read:
        woken any earlier, the claim finds the retry not due yet, and the queue sleeps a whole
        poll."""
        if not self.stopping:
            asyncio.get_running_loop().call_later(delay, self._wake, queue)
