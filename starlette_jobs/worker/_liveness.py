"""Liveness (docs/workers.md): each worker holds a lock that its death releases, and rescues the
jobs of the workers whose lock is free.

- The lock: an advisory lock keyed by the worker id, held by a connection of its own
  (`Store.hold_liveness`), taken before the worker registers. When the process dies (SIGKILL, a
  crash, its host gone) the server ends that connection and frees the lock, within a moment; a
  frozen process (SIGSTOP) keeps it, and its jobs wait for their lease to expire, as before.
- The check, every `interval` seconds: a lock connection that no longer answers is a lost lock,
  and the others may be taking this worker's jobs already: its attempts stop at once, the lock is
  taken again on a new connection, and the jobs of the stopped attempts are given back.
  The LISTEN connection (`_upkeep.Wakeups`) is asked in the same moment: when the network goes
  silent, both are found silent together, so the lock is taken again before LISTEN's new
  connection wakes the queues. Asked apart, a claim on a new connection could start a job that
  the lock's check, finding it lost a moment later, stops and runs again.
- Without the lock (from the check that finds it lost to the one that takes it again, however
  long the database stays out of reach) the worker claims nothing and does not write its
  registry row: a registered worker whose lock is free looks dead to the others, who would
  rescue what it had just claimed. Once the lock is held again, the row is written (`regained`),
  the stopped attempts' jobs are given back, and the queues are woken.
- The rescue, every `interval` seconds too: the running jobs of registered workers whose lock
  is free go back to pending (`Store.rescue_dead_workers`), within seconds of the death rather
  than a whole lease. Lease expiry stays the fallback, and the lease token fences out a late
  outcome of the dead (or merely cut off) worker. Never this worker's own jobs: with its lock
  lost (or freed for a moment while it is taken again) it would look dead to itself.

The check and the rescue run in tasks of their own, apart from each other and from the heartbeat
(`_leases.py`), so that none delays another.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from datetime import datetime

from .._failures import FailureLog
from .._metrics import Metrics
from .._records import FINISHED
from ..store._protocol import Listener, Store
from ._leases import Held
from ._upkeep import Wakeups

logger = logging.getLogger("starlette_jobs.worker")

_RESCUE_LIMIT = 1000


def liveness_interval(lease_duration: float) -> float:
    """Seconds between two checks and rescues: a second, or a third of the lease if shorter."""
    return min(1.0, lease_duration / 3)


class Liveness:
    """Holds `worker_id`'s liveness lock from `start` to `stop`; `stop_attempts()` stops every
    attempt of this worker (its lock was lost) and returns what they held; `wake(queue)` for
    each queue a rescue gave jobs back to; `regained()` once the lock is held again, before any
    claim (it writes the registry row); `resumed()` once the worker may claim again (after the
    jobs of the stopped attempts are given back, so that the claims find them)."""

    def __init__(
        self,
        store: Store,
        worker_id: str,
        interval: float,
        check_timeout: float,
        stop_attempts: Callable[[], Held],
        wake: Callable[[str], None],
        regained: Callable[[], Awaitable[None]],
        resumed: Callable[[], None],
        metrics: Metrics | None = None,
        listen: Wakeups | None = None,
        settle: float | None = None,
        dead_after: float | None = None,
    ) -> None:
        self._store = store
        self._listen = listen
        self._metrics = metrics
        self._worker_id = worker_id
        self._interval = interval
        self._check_timeout = check_timeout
        self._stop_attempts = stop_attempts
        self._wake = wake
        self._regained = regained
        self._resumed = resumed
        self._lock: Listener | None = None
        # The lock's connection found silent, left open until a new one holds the lock: closed,
        # its close could reach the server before the new one waits for it, and free it.
        self._silent_lock: Listener | None = None
        # Whether the worker may claim and register: the lock is held, as of the last check.
        self.held = False
        # The jobs of attempts stopped when the lock was lost, given back once it is held again.
        self._to_release: Held = []
        # When the lock was last taken again (the event loop's clock): what freed it likely
        # freed the others' too (a restart of the server frees every lock at once), and the
        # rescue leaves them this long to take theirs again (`rescue`).
        self._regained_at = -math.inf
        # Two of their checks and the wait of one (theirs are a second apart at most; their
        # statements time out as this worker's do).
        self._settle = 2 * interval + check_timeout if settle is None else settle
        # The other workers found without their lock by the rescue's last look: when they were
        # first found so (the event loop's clock) with their row's last write as it was then.
        # Dead once so for `_dead_after` (two of their checks, at the first of which a live one
        # whose lock was freed takes it again) without writing their row meanwhile (a live one
        # writes it each time it takes its lock again).
        self._lockless_since: dict[str, tuple[float, datetime]] = {}
        self._dead_after = 2 * interval if dead_after is None else dead_after
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self._lock = await self._store.hold_liveness(self._worker_id)
        self.held = True
        # Apart: a rescue waiting on a silent pooled connection must not hold up the check
        # that finds the silence.
        self._tasks = [
            asyncio.create_task(self._every_interval(self.check, "liveness check"),
                                name="starlette_jobs liveness"),
            asyncio.create_task(self._every_interval(self.rescue, "rescue of dead workers' jobs"),
                                name="starlette_jobs rescue"),
        ]  # fmt: skip

    async def stop_checking(self) -> None:
        """No check or rescue from now on, the lock still held: call before the worker deletes
        its row, which a check taking a lost lock again would write back."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def stop(self) -> None:
        """Lets the lock go: call once the worker's row is deleted and its jobs released (those
        of `take_unreleased` among them)."""
        await self.stop_checking()
        self._close_silent_lock()
        if self._lock is not None:
            lock, self._lock = self._lock, None
            await lock.close()

    def take_unreleased(self) -> Held:
        """At shutdown: the jobs of attempts stopped when the lock was lost and not given back
        yet (the lock was not held again), for the worker to give back with the rest."""
        unreleased, self._to_release = self._to_release, []
        return unreleased

    def terminate(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._close_silent_lock()
        if self._lock is not None:
            self._lock.terminate()

    async def _every_interval(self, duty: Callable[[], Awaitable[None]], what: str) -> None:
        failures = FailureLog(logger, what)
        while True:
            await asyncio.sleep(self._interval)
            try:
                await duty()
            except Exception as error:
                failures.failed(error)
            else:
                failures.succeeded()

    async def check(self) -> None:
        """Takes the lock again if it was lost, stopping this worker's attempts first; once it
        is held, writes the row and gives back their jobs before the worker may claim again.
        Then opens LISTEN again if it stopped answering."""
        lock_open = self._lock is not None
        listen_open = self._listen is not None and self._listen.is_open
        lock_answers, listen_answers = await asyncio.gather(
            self._lock_answers(),
            self._listen.answers(self._check_timeout) if self._listen else _yes(),
        )
        if not lock_answers:
            self._lose_lock()
        if (lock_open and not lock_answers) or (listen_open and not listen_answers):
            # An open connection went silent: likely every connection of the process did, the
            # idle pooled ones too (the registry row below is written on a new one). Not when
            # one failed to open: replacing them all each second would add to an overload.
            await self._store.expire_connections()
        if self._lock is None:
            self._lock = await self._store.hold_liveness(self._worker_id)
            self._close_silent_lock()  # its session was ended to hand the lock over
        if not self.held:  # just taken again, or the row or the release failed last time
            await self._resume()
        if not listen_answers and self._listen is not None:
            await self._listen.reopen()

    def _close_silent_lock(self) -> None:
        if self._silent_lock is not None:
            self._silent_lock.terminate()
            self._silent_lock = None

    async def _lock_answers(self) -> bool:
        return self._lock is not None and await self._lock.alive(self._check_timeout)

    def _lose_lock(self) -> None:
        self.held = False  # first: a claim that returns from now on hands its jobs back
        # What the rescue found of the others' locks says nothing of them once this one's is
        # taken again: a peer free then and free again is likely freed again, not dead since.
        self._lockless_since = {}
        if self._lock is not None:
            # None silent before: the takeover that gave this lock closed it.
            self._silent_lock, self._lock = self._lock, None
            self._to_release += self._stop_attempts()
            logger.error(
                "worker %s: lost the connection that holds its liveness lock; other workers "
                "may take its jobs now, so its attempts were stopped: %s",
                self._worker_id, sorted(job_id for job_id, _ in self._to_release),
            )  # fmt: skip

    async def _resume(self) -> None:
        await self._regained()
        while self._to_release:  # a claim that returned meanwhile adds to it
            giving_back = list(self._to_release)
            released = await self._store.release_jobs(giving_back)
            del self._to_release[: len(giving_back)]
            if released:
                logger.warning(
                    "worker %s: gave back the jobs of the attempts it stopped: %s",
                    self._worker_id, sorted(released),
                )  # fmt: skip
        self.held = True  # no await since the loop's last look: nothing is left behind
        self._regained_at = asyncio.get_running_loop().time()
        logger.warning("worker %s: holds its liveness lock again", self._worker_id)
        self._resumed()

    def hand_back(self, held: Held) -> None:
        """Jobs claimed by a claim that returned after the lock was found lost: given back with
        the stopped attempts' once the lock is held again."""
        self._to_release += held

    async def rescue(self) -> None:
        # Never its own jobs: a lock lost a moment ago, which its check has not seen yet,
        # would make it look dead to itself (the check stops its attempts and gives them back).
        # And no one's while its own lock is lost, or a moment after it was taken again: the
        # others are taking theirs again then (the statement also finds nothing while the
        # caller's own lock is free, which its check may not have seen yet).
        now = asyncio.get_running_loop().time()
        if not self.held or now < self._regained_at + self._settle:
            return
        # A worker is dead once its lock has stayed free for two of its checks: a live one
        # whose lock was freed under it takes it again at the next. The guard above is not
        # enough: an operator's `pg_terminate_backend` over every liveness session ends them
        # one after another, and a rescue between two of them saw a live peer's lock free and
        # its own still held. Nor are looks alone: a lock freed again each time just after its
        # worker takes it again is free at every look; the worker's row, written each time it
        # takes the lock again, tells it from a dead one's.
        lockless = await self._store.lockless_workers(excluding=self._worker_id)
        since = self._lockless_since
        self._lockless_since = {
            worker: found if (found := since.get(worker)) and found[1] == seen else (now, seen)
            for worker, seen in lockless.items()
        }
        dead = {
            worker: seen
            for worker, (first_found, seen) in self._lockless_since.items()
            if now - first_found >= self._dead_after
        }
        if not dead:
            return
        rescued = await self._store.rescue_dead_workers(
            _RESCUE_LIMIT, excluding=self._worker_id, among=dead
        )
        for job_id, queue, status in rescued:
            logger.warning(
                "job %s on queue %r: its worker died, now %s", job_id, queue, status.value
            )
            if self._metrics is not None and self._metrics.recording():
                self._metrics.rescued(queue, status.value, "worker_dead")
            self._wake(queue)
        if any(status in FINISHED for _, _, status in rescued):
            # A workflow's step among them (failed, or cancelled) tells the steps waiting for
            # it now, not at the next upkeep round (docs/workflows.md).
            await self._store.settle_steps()


async def _yes() -> bool:
    return True
