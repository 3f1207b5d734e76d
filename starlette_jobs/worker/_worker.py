"""The worker: per-queue claim loops, bounded concurrency, drain and shutdown.

Everything it tracks about a running job belongs to that attempt's lease token, never to the
job id: the same job can come back to this worker (after a release, or a rescue while this
worker was frozen) while a stale copy of it still runs here.
"""

from __future__ import annotations

import asyncio
import logging
from time import perf_counter
from uuid import UUID

from .._attempt_records import Unfinished
from .._failures import FailureLog
from .._metrics import Metrics
from .._tracing import Tracing
from ..store._connectivity import Backoff, worker_statement_timeout
from ..store._protocol import Store
from ._cancels import AttemptStops
from ._controls import QueueControlsCopy
from ._drain import Draining, drain
from ._duties import SharedDuties
from ._launch import AttemptLauncher
from ._leases import Held, LeaseKeeper
from ._liveness import Liveness, liveness_interval
from ._loop_lag import LoopLagGuard
from ._loop_time import JobLoopTime
from ._outcomes import OutcomeWriter
from ._progress import ProgressWriter
from ._queues import QueueState, release_lost_claims
from ._registry import Registration, new_worker
from ._running import RunningAttempts
from ._settings import (
    WorkerSettings,
    new_worker_id,
)
from ._shutdown import claims_settled, give_running_jobs_the_grace, release_held
from ._throughput import ThroughputCounter
from ._upkeep import Wakeups

logger = logging.getLogger("starlette_jobs.worker")


class Worker:
    """Claims and runs jobs of the configured queues until `stop` is called."""

    def __init__(
        self,
        store: Store,
        settings: WorkerSettings,
        tracing: Tracing,
        metrics: Metrics | None = None,
    ) -> None:
        self.worker_id = new_worker_id()
        self._store = store
        self._settings = settings
        self._metrics = Metrics() if metrics is None else metrics
        self._queues = {name: QueueState(name) for name in settings.queues}
        self._running: RunningAttempts[asyncio.Task[None]] = RunningAttempts(settings.queues)
        # How long the jobs hold the loop, counted only for the guard that needs it.
        loop_time = None if settings.loop_lag_target is None else JobLoopTime()
        self._guard = LoopLagGuard(
            settings.queues, settings.loop_lag_target, self._running.count, self._may_claim,
            held_by_jobs=None if loop_time is None else loop_time.take,
        )  # fmt: skip
        self._outcomes = OutcomeWriter(store, self._metrics)
        self._progress = ProgressWriter(store)
        # The attempts it ends, per queue and minute, added to the store's every few seconds.
        self.throughput = ThroughputCounter(store)
        # The worker's statements wait at most this long (see _connectivity); the liveness
        # check waits half as long for the lock's and LISTEN's connections, at least every
        # second, so that a silent one is found within about as long.
        self._statement_timeout = worker_statement_timeout(settings.lease_duration)
        self._stops = AttemptStops(self._running, self._statement_timeout)
        self._leases = LeaseKeeper(
            store, settings.lease_duration, self._held, self._lost, self._stops.requested
        )
        self._wakeups = Wakeups(
            store, list(self._queues), self.wake, self._stops.requested,
            lambda queue: self._controls.changed(queue),  # made below
        )  # fmt: skip
        # The lock whose release tells the other workers this one died, taken before it
        # registers, let go once its row is deleted. Its check asks LISTEN's connection too.
        self._liveness = Liveness(
            store, self.worker_id, liveness_interval(settings.lease_duration),
            self._statement_timeout / 2, self._stop_every_attempt, self.wake,
            lambda: self._registration.register_again(),  # made just below
            self._wake_every_queue, self._metrics, listen=self._wakeups,
        )  # fmt: skip
        # The worker's row in the registry, refreshed as often as the leases, while it holds
        # its liveness lock.
        self._registration = Registration(
            store,
            new_worker(self.worker_id, list(settings.queues), settings.lease_duration / 3),
            self._statement_timeout,
            lambda: self._liveness.held,
        )
        self._controls = QueueControlsCopy(
            store, list(self._queues), settings.limits, settings.poll_interval, self.wake
        )
        # Upkeep, periodic ticks, gauges, and which job names it claims.
        self._shared = SharedDuties(
            store, settings, self.worker_id, self._metrics, self.wake, self._controls.paused
        )
        self._strays = self._shared.strays
        # Each claimed job's task, and its outcome handed to the writer.
        self._launcher = AttemptLauncher(
            store, tracing, self._metrics, self._running, self._stops, self._outcomes,
            self._progress, self._controls, self.throughput.ended, loop_time, self.wake,
            settings.max_payload_bytes, self._strays.declared_elsewhere,
        )  # fmt: skip
        self.depths = self._shared.depths
        self._stopping = False
        self._stopped = asyncio.Event()  # set with _stopping: ends the claim loops' backoff
        self._tasks: list[asyncio.Task[None]] = []
        # Attempts still running in a task or thread after shutdown gave up on them.
        self.abandoned = 0

    @property
    def queue_names(self) -> list[str]:
        return list(self._queues)

    async def start(self) -> None:
        try:
            self._outcomes.start()
            self._progress.start()
            await self._wakeups.start()
            await self._controls.start()
            await self._liveness.start()
            await self._registration.start()
            for state in self._queues.values():
                self._tasks.append(
                    asyncio.create_task(
                        self._claim_loop(state), name=f"starlette_jobs claim {state.name}"
                    )
                )
            self._leases.start()
            self._shared.start()
            self.throughput.start()
            self._guard.start()
        except BaseException:
            # Nothing may outlive a start that failed: the pool is closed next.
            for task in self._tasks:
                task.cancel()
            await self._leases.stop()
            await self._liveness.stop_checking()  # no check may write the row back (see stop)
            await self._registration.stop()
            self._liveness.terminate()
            await self._shared.stop()
            await self.throughput.stop(None)
            await self._controls.stop()
            await self._outcomes.stop(timeout=0)
            await self._progress.stop()
            self._wakeups.terminate()
            raise
        logger.info("worker %s started on queues %s", self.worker_id, dict(self._settings.queues))

    def wake(self, queue: str) -> None:
        state = self._queues.get(queue)
        if state is not None:
            state.may_have_more = True
            state.wake.set()

    def running_count(self) -> int:
        return self._running.count()

    # -- claiming -----------------------------------------------------------------------------

    async def _claim_loop(self, state: QueueState) -> None:
        backoff = Backoff()
        failures = FailureLog(logger, f"claiming from queue {state.name!r}")
        settings = self._settings
        while not self._stopping:
            # Cleared before claiming, so a NOTIFY that arrives during the claim is not lost.
            state.wake.clear()
            free = self._guard.room(state.name)
            # Paused, or without its liveness lock: polls until resumed, or woken once held.
            if free > 0 and not self._controls.paused(state.name) and self._liveness.held:
                wanted = min(free, settings.batch_size)
                started = perf_counter() if self._metrics.recording() else None
                try:
                    if state.reconcile_until is not None:
                        await release_lost_claims(self._store, state, self.worker_id, self._held)
                    # The store's claim_batch, unless the queue has limits.
                    claims = await self._controls.claim(
                        state.name, wanted, self.worker_id, settings.lease_duration,
                        self._outcomes.held, self._strays.names(state.name),
                    )  # fmt: skip
                except BaseException as error:
                    # A claim that reached the server late is ended by it within a statement
                    # timeout of arriving; the connection it came on is cut at once.
                    loop = asyncio.get_running_loop()
                    state.reconcile_until = loop.time() + self._statement_timeout
                    if not isinstance(error, Exception):
                        raise  # cancelled: shutdown gave up on this claim
                    if started is not None:
                        self._metrics.claimed(state.name, 0, perf_counter() - started, error)
                    # Any error, e.g. a read-only server after a failover, or too many
                    # connections: the loop must outlive them, or the process looks healthy
                    # and never claims.
                    failures.failed(error)
                    await backoff.wait(self._stopped)
                    continue
                backoff.reset()
                failures.succeeded()
                if started is not None:
                    self._metrics.claimed(state.name, len(claims), perf_counter() - started, None)
                if claims and logger.isEnabledFor(logging.DEBUG):  # nothing to format otherwise
                    ids = [claim.id for claim in claims]
                    logger.debug("queue %r: claimed %d job(s): %s", state.name, len(ids), ids)
                if self._stopping:
                    # Stop arrived during the claim: hand the jobs straight back.
                    await release_held(self._store, [(c.id, c.lease_token) for c in claims])
                    return
                if not self._liveness.held:
                    # The liveness lock was found lost during the claim: the others may take
                    # these jobs now. Given back once it is held again; not run.
                    self._liveness.hand_back([(c.id, c.lease_token) for c in claims])
                    continue
                self._launcher.launch(state, claims)
                state.may_have_more = len(claims) == wanted
                if state.may_have_more:
                    room = self._guard.room(state.name)
                    if wanted < settings.batch_size or room <= 0:
                        # The room, not the batch size, cut this claim: while the jobs are
                        # quick, a claim of one job per round trip is what holds the queue
                        # back, whether or not they are running when the loop's lag is sampled.
                        self._guard.held_back(state.name)
                    if room > 0:
                        continue
            if not state.wake.is_set():
                await state.wait(self._settings.poll_interval)
                if state.polled:
                    state.may_have_more = True  # the poll: delayed jobs may have come due

    def _may_claim(self, queue: str) -> None:
        """The loop caught up and `queue` may run more jobs: claim if it may have some."""
        if self._queues[queue].may_have_more:
            self._queues[queue].wake.set()

    # -- leases -------------------------------------------------------------------------------

    def _held(self) -> Held:
        """Leases to keep: running attempts', and those of attempts that ended but whose outcome
        is not written yet (a long outage must not hand finished jobs to another worker)."""
        return self._running.held() + self._outcomes.held()

    def _lost(self, job_id: int, token: UUID) -> None:
        """The heartbeat found the lease gone: stop that attempt, unless the lease ended with a
        success the job wrote itself (`complete_in`), whose outcome only waits to be refused."""
        if not self._outcomes.completed(token):
            self._stops.lost(job_id, token)

    def _wake_every_queue(self) -> None:
        """The liveness lock is held again, and the jobs of the attempts stopped meanwhile are
        given back: the claim loops claim again."""
        for queue in self._queues:
            self.wake(queue)

    def _stop_every_attempt(self) -> Held:
        """The liveness lock was lost: others may take every job this worker runs. Stops each
        attempt but a sync job's (no outcome is written for it) and returns what they held."""
        return self._stops.stop_all_but_threads(self.worker_id)

    # -- drain and shutdown -------------------------------------------------------------------

    async def drain(
        self, timeout: float, *, include_scheduled: bool, retry_wait: float = 0.0
    ) -> Unfinished:
        """See `_drain.drain`: until no job of this worker's queues is left to run; then the
        attempts it counted are written, so that `jobs.throughput` shows them at once."""
        unfinished = await drain(
            self._store,
            Draining(
                self.queue_names,
                self._controls.paused_now,
                self.wake,
                self.running_count,
                self._outcomes,
                self._strays.known,
            ),
            timeout,
            include_scheduled=include_scheduled,
            retry_wait=retry_wait,
        )
        await self.throughput.flush_logged()
        return unfinished

    async def stop(self) -> None:
        """Stops claiming, gives running jobs the grace period, then releases what is left.

        Takes at most the grace period, plus `UNWIND_SECONDS`, plus one worker statement
        timeout for the last writes (releases, outcomes, a claim in flight): on a network that
        went silent, the jobs not released are left to lease expiry (see `_shutdown.py`).
        """
        self._stopping = self._launcher.stopping = True
        self._stopped.set()
        self._guard.stop()
        for state in self._queues.values():
            state.wake.set()
        # A claim in flight hands its jobs straight back (see the claim loop); no job starts
        # after this point, so these are all the attempts the grace is for.
        to_release, self.abandoned = await give_running_jobs_the_grace(
            self._running.claims(), self._launcher.threads, self._settings.shutdown_grace,
            self._stops.cancel,
        )  # fmt: skip
        # One statement timeout for every last write, the registry row's deletion included.
        budget = self._statement_timeout
        deadline = asyncio.get_running_loop().time() + budget
        settled = asyncio.gather(
            release_held(self._store, to_release + self._liveness.take_unreleased()),
            self._outcomes.stop(timeout=budget),
            claims_settled(
                self._tasks,
                self._queues.values(),
                lambda state: release_lost_claims(self._store, state, self.worker_id, self._held),
            ),
            self._wakeups.stop(),
            self.throughput.stop(budget),
        )
        try:
            await asyncio.wait_for(settled, budget)
        except TimeoutError:
            logger.error(
                "the database did not answer within %.1f s at shutdown; jobs not released are "
                "left to their lease: once it expires, any worker runs them again, or fails "
                "them if they have no attempt left",
                budget,
            )
            await self._outcomes.stop(timeout=0)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for state in self._queues.values():
            state.stop_polling()
        await self._leases.stop()
        # Refreshed through the drain above, so no peer takes it for dead meanwhile; the lock
        # held until it is deleted, but no check may take a lost lock again and write it back.
        await self._liveness.stop_checking()
        await self._registration.stop(max(0.0, deadline - asyncio.get_running_loop().time()))
        await self._liveness.stop()
        await self._shared.stop()
        await self._controls.stop()
        await self._progress.stop()
        self._wakeups.terminate()  # if closing it ran out of time
        logger.info("worker %s stopped", self.worker_id)
