"""The worker: per-queue claim loops, bounded concurrency, leases, wake-ups, drain and shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from ._attempt import run_attempt
from ._connectivity import DATABASE_ERRORS, Backoff
from ._errors import UnknownJobError
from ._job import registered_job
from ._outcomes import OutcomeWriter
from ._store import Claim, Store
from ._tracing import Tracing

logger = logging.getLogger("starlette_jobs.worker")

_RESCUE_LIMIT = 1000
# Retention deletes in batches of this many rows, so no statement holds locks for long.
_PRUNE_BATCH = 1000
_PRUNE_BATCHES_PER_ROUND = 20
# How long shutdown waits for a statement in flight (a claim, the last outcomes) before giving up
# on it; the database may hang or be gone.
_STATEMENT_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    queues: Mapping[str, int]
    batch_size: int
    poll_interval: float
    lease_duration: float
    shutdown_grace: float
    retention: float | None


def _horizon(remaining: float, include_scheduled: bool) -> float | None:
    """How far ahead `drain` looks for pending jobs; None is "any pending job"."""
    if not include_scheduled:
        return 0.0
    return max(remaining, 0.0) if math.isfinite(remaining) else None


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(eq=False)
class _QueueState:
    name: str
    concurrency: int
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    running: dict[int, tuple[asyncio.Task[None], Claim]] = field(default_factory=dict)
    # False once a claim came back short: until a NOTIFY or a poll, a freed slot need not
    # trigger another claim.
    may_have_more: bool = True


class Worker:
    """Claims and runs jobs of the configured queues until `stop` is called."""

    def __init__(self, store: Store, dsn: str, settings: WorkerSettings, tracing: Tracing) -> None:
        self.worker_id = new_worker_id()
        self._store = store
        self._dsn = dsn
        self._settings = settings
        self._tracing = tracing
        self._queues = {
            name: _QueueState(name, concurrency) for name, concurrency in settings.queues.items()
        }
        self._outcomes = OutcomeWriter(store)
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        self._maintenance: asyncio.Task[None] | None = None
        self._listener: asyncpg.Connection[Any] | None = None
        # Attempts this worker cancelled (shutdown, lost lease), as opposed to a job that
        # cancelled itself.
        self._cancelled: set[int] = set()
        # Attempts still running in a task or thread after shutdown gave up on them.
        self.abandoned = 0

    @property
    def queue_names(self) -> list[str]:
        return list(self._queues)

    async def start(self) -> None:
        try:
            self._outcomes.start()
            await self._listen()
            for state in self._queues.values():
                self._tasks.append(
                    asyncio.create_task(
                        self._claim_loop(state), name=f"starlette_jobs claim {state.name}"
                    )
                )
            self._maintenance = asyncio.create_task(self._maintain(), name="starlette_jobs leases")
        except BaseException:
            # Nothing may outlive a start that failed: the pool is closed next.
            for task in (*self._tasks, self._maintenance):
                if task is not None:
                    task.cancel()
            await self._outcomes.stop(timeout=0)
            if self._listener is not None:
                self._listener.terminate()
            raise
        logger.info("worker %s started on queues %s", self.worker_id, dict(self._settings.queues))

    def wake(self, queue: str) -> None:
        state = self._queues.get(queue)
        if state is not None:
            state.may_have_more = True
            state.wake.set()

    def running_count(self) -> int:
        return sum(len(state.running) for state in self._queues.values())

    # -- claiming -----------------------------------------------------------------------------

    async def _claim_loop(self, state: _QueueState) -> None:
        backoff = Backoff()
        settings = self._settings
        while not self._stopping:
            # Cleared before claiming, so a NOTIFY that arrives during the claim is not lost.
            state.wake.clear()
            free = state.concurrency - len(state.running)
            if free > 0:
                wanted = min(free, settings.batch_size)
                try:
                    claims = await self._store.claim_batch(
                        state.name, wanted, self.worker_id, settings.lease_duration
                    )
                except DATABASE_ERRORS as error:
                    logger.warning("claiming from queue %r failed, retrying: %s", state.name, error)
                    await backoff.wait()
                    continue
                except Exception:
                    # E.g. a read-only server after a failover, or too many connections: the
                    # loop must outlive them, or the process looks healthy and never claims.
                    logger.exception("claiming from queue %r failed, retrying", state.name)
                    await backoff.wait()
                    continue
                backoff.reset()
                if self._stopping:
                    # Stop arrived during the claim: hand the jobs straight back.
                    await self._release([(c.id, c.lease_token) for c in claims])
                    return
                for claim in claims:
                    task = asyncio.create_task(self._execute(state, claim))
                    state.running[claim.id] = (task, claim)
                state.may_have_more = len(claims) == wanted
                if state.may_have_more and len(state.running) < state.concurrency:
                    continue
            if not state.wake.is_set():
                # asyncio.timeout rather than wait_for: no task of its own per wait.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(settings.poll_interval):
                        await state.wake.wait()
            if not state.wake.is_set():
                state.may_have_more = True  # the poll: delayed jobs may have come due

    async def _execute(self, state: _QueueState, claim: Claim) -> None:
        try:
            outcome = await run_attempt(claim, self._tracing, lambda: claim.id in self._cancelled)
        finally:
            self._cancelled.discard(claim.id)
            del state.running[claim.id]
            if state.may_have_more:
                state.wake.set()
        self._outcomes.add(outcome)
        if outcome.retry_delay is not None and not self._stopping:
            # Wake when the retry comes due instead of at the next poll. A hint only: any worker
            # may claim it, and the poll still covers a retry whose wake-up is lost.
            asyncio.get_running_loop().call_later(outcome.retry_delay, self.wake, state.name)

    # -- leases, rescue and the LISTEN connection -----------------------------------------------

    async def _listen(self) -> None:
        try:
            self._listener = await self._store.listen(self._dsn, list(self._queues), self.wake)
        except Exception as error:  # unreachable, too many connections...: polling still works
            self._listener = None
            logger.warning("LISTEN connection failed, polling until it is back: %s", error)

    async def _maintain(self) -> None:
        """Extends this worker's leases, rescues jobs whose lease expired, keeps LISTEN alive."""
        interval = self._settings.lease_duration / 3
        while True:
            await asyncio.sleep(interval)
            try:
                await self._extend_leases()
                await self._rescue_expired()
                await self._prune_finished()
                if self._listener is None or self._listener.is_closed():
                    await self._listen()
                    for queue in self._queues:
                        self.wake(queue)  # notifications may have been missed meanwhile
            except DATABASE_ERRORS as error:
                logger.warning("lease upkeep failed, retrying in %.1f s: %s", interval, error)
            except Exception:
                logger.exception("lease upkeep failed, retrying in %.1f s", interval)

    async def _extend_leases(self) -> None:
        running = self._running_claims()
        tasks = {claim.id: task for task, claim in running}
        held = [(claim.id, claim.lease_token) for _, claim in running] + self._outcomes.held()
        if not held:
            return
        kept = await self._store.extend_leases(held, self._settings.lease_duration)
        # An outcome written while the extension was in flight cleared its lease: not a loss.
        still_held = {claim.id for _, claim in self._running_claims()}
        still_held.update(job_id for job_id, _ in self._outcomes.held())
        for job_id, _ in held:
            if job_id in kept or job_id not in still_held:
                continue
            task = tasks.get(job_id)
            logger.warning(
                "job %s: this worker no longer holds its lease (it expired and the job was "
                "rescued, or it was released)%s",
                job_id, "; cancelling this worker's attempt" if task else "",
            )  # fmt: skip
            if task is not None:
                # Another worker may be running it now: stop this copy's side effects early.
                self._cancel(job_id, task)

    def _cancel(self, job_id: int, task: asyncio.Task[None]) -> None:
        self._cancelled.add(job_id)
        task.cancel()

    def _running_claims(self) -> list[tuple[asyncio.Task[None], Claim]]:
        return [entry for state in self._queues.values() for entry in state.running.values()]

    async def _rescue_expired(self) -> None:
        rescued = await self._store.rescue_expired(_RESCUE_LIMIT)
        for job_id, queue, status in rescued:
            logger.warning("job %s on queue %r: lease expired, now %s", job_id, queue, status.value)
            self.wake(queue)

    async def _prune_finished(self) -> None:
        """Deletes jobs finished longer than the retention ago, a bounded amount per round, so
        upkeep stays short; a backlog is worked off over the next rounds."""
        retention = self._settings.retention
        if retention is None:
            return
        deleted = 0
        for _ in range(_PRUNE_BATCHES_PER_ROUND):
            batch = await self._store.prune_finished(retention, _PRUNE_BATCH)
            deleted += batch
            if batch < _PRUNE_BATCH or self._stopping:
                break
        if deleted:
            logger.info("deleted %d job(s) finished more than %.0f s ago", deleted, retention)

    # -- drain and shutdown -------------------------------------------------------------------

    async def drain(self, timeout: float, *, include_scheduled: bool) -> None:
        """Waits until no job of this worker's queues is running anywhere, or pending and due
        now (or, with `include_scheduled`, before the timeout ends)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        async with asyncio.timeout_at(deadline if math.isfinite(deadline) else None):
            while True:
                for queue in self._queues:
                    self.wake(queue)
                if self.running_count() == 0:
                    await self._outcomes.flush()
                    horizon = _horizon(deadline - loop.time(), include_scheduled)
                    try:
                        if await self._store.count_unfinished(self.queue_names, horizon) == 0:
                            return
                    except DATABASE_ERRORS as error:  # e.g. PostgreSQL restarting: keep going
                        logger.warning("drain: counting the jobs left failed, retrying: %s", error)
                        await asyncio.sleep(0.5)
                self._outcomes.written.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._outcomes.written.wait(), 0.05)

    async def stop(self) -> None:
        """Stops claiming, gives running jobs the grace period, then releases what is left."""
        self._stopping = True
        for state in self._queues.values():
            state.wake.set()
        # A claim in flight finishes (and its jobs start) unless the database hangs.
        if self._tasks:
            _, hung = await asyncio.wait(self._tasks, timeout=_STATEMENT_TIMEOUT)
            for task in hung:
                task.cancel()

        running = dict(self._running_claims())
        if running:
            logger.info(
                "waiting up to %.1f s for %d running job(s)",
                self._settings.shutdown_grace,
                len(running),
            )
            _, unfinished = await asyncio.wait(running, timeout=self._settings.shutdown_grace)
            for task in unfinished:
                self._cancel(running[task].id, task)
            if unfinished:
                # Well-behaved jobs unwind at once; one that ignores cancellation is left behind,
                # and so is a sync job: its thread cannot be interrupted.
                await asyncio.wait(unfinished, timeout=0.5)
                self.abandoned = sum(
                    1
                    for task in unfinished
                    if not task.done() or not _is_async_job(running[task].name)
                )
                # A job that caught the cancellation and returned has its outcome buffered:
                # release only the jobs that are still running or ended cancelled.
                await self._release(
                    [
                        (running[task].id, running[task].lease_token)
                        for task in unfinished
                        if not task.done() or task.cancelled()
                    ]
                )
        await self._outcomes.stop(timeout=_STATEMENT_TIMEOUT)
        if self._maintenance is not None:
            self._maintenance.cancel()
            await asyncio.gather(self._maintenance, return_exceptions=True)
        if self._listener is not None and not self._listener.is_closed():
            try:
                await self._listener.close(timeout=5)
            except Exception:  # closing a connection the server already dropped
                self._listener.terminate()
        logger.info("worker %s stopped", self.worker_id)

    async def _release(self, held: list[tuple[int, Any]]) -> None:
        if not held:
            return
        try:
            released = await self._store.release_jobs(held)
        except Exception as error:  # shutdown goes on: the leases expire instead
            logger.error(
                "could not release %d job(s) at shutdown (%s); they run again once their lease "
                "expires",
                len(held),
                error,
            )
            return
        logger.info("released %d job(s) back to pending: %s", len(released), sorted(released))


def _is_async_job(name: str) -> bool:
    try:
        return registered_job(name).is_async
    except UnknownJobError:
        return True  # never started: nothing runs in a thread
