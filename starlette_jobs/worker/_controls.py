"""What the worker knows of its queues' controls (docs/limits.md): whether each is paused, and
whether it has a limit, which its claims must obey.

The controls are rows of the store that any process may change (`jobs.pause` in a web app, a
worker of a newer deploy declaring other limits), so the worker keeps a copy, read at start,
again at once when the store announces a change, and every poll interval in any case (one
query for all its queues): a notification lost with its connection delays a pause by one poll
interval at most.

A queue that is neither paused nor limited costs its claims nothing: they look at this copy
only. A limited queue's claim goes through `Store.claim_limited_batch`, which reads the row
itself, so that every worker obeys the same limit at the moment it claims. A worker that ends
a job of a limited queue wakes the queue's workers once the outcome is written (one that found
no room is waiting for it), several queues' wake-ups in one statement.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from uuid import UUID

from .._attempt_records import Claim
from .._errors import DatabaseTooSlowError, DatabaseUnavailableError
from .._failures import FailureLog
from .._job import registered_jobs
from .._queue import QueueControls, QueueLimits
from ..store._protocol import Store

logger = logging.getLogger("starlette_jobs.worker")


class QueueControlsCopy:
    """The worker's copy of its queues' controls, and the wake-ups it owes when one of their
    jobs ends. `wake(queue)` is called for a queue that was resumed or whose limits changed:
    its claim loop may have stopped claiming."""

    def __init__(
        self,
        store: Store,
        queues: Sequence[str],
        declared: Mapping[str, QueueLimits],
        interval: float,
        wake: Callable[[str], None],
    ) -> None:
        self._store = store
        self._declared = dict(declared)
        self._interval = interval
        self._wake = wake
        # Until the first read: what this worker declares, not paused.
        self._current = {
            queue: QueueControls(queue, limits=self._declared.get(queue, QueueLimits()))
            for queue in queues
        }
        # Asked for every claim and every job's outcome: kept as a set, not worked out.
        self._limited = {queue for queue, c in self._current.items() if c.limits.limited}
        self._changed = asyncio.Event()
        # Queues whose controls changed since the last read, and those the read in flight is
        # for: they claim nothing until it is done, so that a pause stops claims as soon as
        # its notification arrives, not one read later.
        self._unsure: set[str] = set()
        self._reading: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        # The declared limits are not written yet: a queue's row was locked as it started.
        self._undeclared = False
        self._to_wake: set[str] = set()
        self._waking: asyncio.Task[None] | None = None
        self._rate_wakeups: dict[str, asyncio.TimerHandle] = {}
        # The limited queues whose latest claim took jobs (see `_claimed_short`).
        self._took_last: set[str] = set()

    def paused(self, queue: str) -> bool:
        """Whether claims of `queue` must wait (it is paused, or may have been just now)."""
        return self._current[queue].paused or queue in self._unsure or queue in self._reading

    async def paused_now(self) -> set[str]:
        """The queues paused (a drain leaves their pending jobs: they may wait for a resume
        for ever). Read again if the copy has one paused: a resume made just now counts."""
        if any(controls.paused for controls in self._current.values()):
            with contextlib.suppress(DatabaseUnavailableError):  # the copy is what we know
                await self.refresh()
        return {queue for queue, controls in self._current.items() if controls.paused}

    def limited(self, queue: str) -> bool:
        return queue in self._limited

    async def start(self) -> None:
        """Writes the limits this worker declares (the last worker to start wins), reads the
        controls, and keeps reading them."""
        if self._declared:
            await self._declare()
            warn_of_unkeyed_jobs(self._declared)
        await self.refresh()
        self._task = asyncio.create_task(self._run(), name="starlette_jobs queue controls")

    async def _declare(self) -> None:
        """Writes the declared limits; a queue's row locked elsewhere (an operator's session)
        leaves them to the next read of the controls, rather than hold up the start (which took
        the wait for an outage, and refused every enqueue meanwhile)."""
        try:
            await self._store.declare_queues(self._declared)
        except DatabaseTooSlowError as error:
            if not self._undeclared:
                logger.warning(
                    "could not write the limits of queues %s yet (%s): the worker starts with "
                    "those stored, and writes its own once it can",
                    sorted(self._declared), error,
                )  # fmt: skip
            self._undeclared = True
            return
        if self._undeclared:
            logger.info("wrote the limits of queues %s", sorted(self._declared))
        self._undeclared = False

    async def stop(self) -> None:
        for handle in self._rate_wakeups.values():
            handle.cancel()
        for task in (self._task, self._waking):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    def changed(self, queue: str) -> None:
        """The store announced that `queue`'s controls changed (perhaps not one of ours)."""
        if queue in self._current:
            self._unsure.add(queue)
            self._changed.set()

    async def refresh(self) -> None:
        """Reads the controls again; wakes each queue that may claim more than it did."""
        self._reading, self._unsure = self._reading | self._unsure, set()
        try:
            found = await self._store.queue_controls(list(self._current))
        except BaseException:
            self._unsure |= self._reading
            raise
        finally:
            reading, self._reading = self._reading, set()
        for queue, controls in found.items():
            before, self._current[queue] = self._current[queue], controls
            if controls.limits.limited:
                self._limited.add(queue)
            else:
                self._limited.discard(queue)
            if controls != before:
                logger.info(
                    "queue %r: %s, limits %s", queue,
                    "paused" if controls.paused else "not paused", controls.limits,
                )  # fmt: skip
            if (controls != before or queue in reading) and not self.paused(queue):
                self._wake(queue)

    async def claim(
        self,
        queue: str,
        limit: int,
        worker_id: str,
        lease_seconds: float,
        held: Callable[[], Sequence[tuple[int, UUID]]],
        names: Sequence[str] | None,
    ) -> list[Claim]:
        """The store's `claim_batch`, or for a limited queue its `claim_limited_batch`, of jobs
        named `names` (None: any): the attempts that ended here (`held`: outcomes not written
        yet) count as running until their outcome is written, but leave their room to this
        claim now."""
        if not self.limited(queue):
            return await self._store.claim_batch(queue, limit, worker_id, lease_seconds, names)
        ended = [token for _, token in held()]
        claims = await self._store.claim_limited_batch(
            queue, limit, worker_id, lease_seconds, ended, names
        )
        if len(claims) < limit:
            self._claimed_short(queue, took_some=bool(claims))
        else:
            self._took_last.add(queue)
        return claims

    def after_outcome(
        self, queue: str, then: Callable[[], None] | None
    ) -> Callable[[], None] | None:
        """What to do once an outcome of `queue` is written: `then`, and for a limited queue,
        wake its workers for the room the job left."""
        if queue not in self._limited:  # not `limited()`: asked for every job's outcome
            return then
        return functools.partial(self._ended, queue, then)

    def _ended(self, queue: str, then: Callable[[], None] | None) -> None:
        if then is not None:
            then()
        self._to_wake.add(queue)
        if self._waking is None or self._waking.done():
            self._waking = asyncio.create_task(self._wake_all(), name="starlette_jobs wake")

    def _claimed_short(self, queue: str, *, took_some: bool) -> None:
        """A claim of `queue` took fewer jobs than it asked for. Should a rate limit have cut
        it, nothing announces when the next start is allowed: within a rate period, one is.
        The poll covers a period longer than its interval.

        Two empty claims in a row: the queue has nothing due (a claim one rate period after
        one that took jobs always finds a start allowed), so no wake-up is armed: a job
        enqueued announces itself. Without that, an idle queue would be claimed every period."""
        took_before = queue in self._took_last
        if took_some:
            self._took_last.add(queue)
        else:
            self._took_last.discard(queue)
        limits = self._current[queue].limits
        if limits.rate_limit is None or limits.rate_period >= self._interval:
            return
        if not took_some and not took_before:
            return
        if queue not in self._rate_wakeups:
            loop = asyncio.get_running_loop()
            self._rate_wakeups[queue] = loop.call_later(limits.rate_period, self._rate_wake, queue)

    def _rate_wake(self, queue: str) -> None:
        del self._rate_wakeups[queue]
        self._wake(queue)

    async def _wake_all(self) -> None:
        while self._to_wake:
            queues, self._to_wake = sorted(self._to_wake), set()
            try:
                await self._store.wake_queues(queues)
            except Exception as error:  # the others claim at their next poll instead
                logger.warning("could not wake the workers of queues %s: %s", queues, error)

    async def _run(self) -> None:
        failures = FailureLog(logger, "reading the queues' controls")
        while True:
            try:
                async with asyncio.timeout(self._interval):
                    await self._changed.wait()
            except TimeoutError:
                pass
            self._changed.clear()
            try:
                if self._undeclared:
                    await self._declare()
                await self.refresh()
            except Exception as error:
                failures.failed(error)
            else:
                failures.succeeded()


def warn_of_unkeyed_jobs(declared: Mapping[str, QueueLimits]) -> None:
    """Logs each job of a queue with a key limit that the limit cannot reach: one without the
    argument (a misspelt `key=`), or one whose argument has a default, which is not stored
    when the caller leaves it out, so that such a job has no key and is not limited by it."""
    for job in registered_jobs():
        limits = declared.get(job.queue)
        if limits is None or limits.key is None:
            continue
        parameter = job._arguments.signature.parameters.get(limits.key)
        if parameter is None:
            logger.warning(
                "queue %r limits jobs per %r, but job %r takes no such argument: its jobs are "
                "not limited per key", job.queue, limits.key, job.name,
            )  # fmt: skip
        elif parameter.default is not inspect.Parameter.empty:
            logger.warning(
                "queue %r limits jobs per %r, and job %r gives it a default: a job enqueued "
                "without it stores no key and is not limited per key", job.queue, limits.key,
                job.name,
            )  # fmt: skip
