"""What a worker's claim loop keeps about its queue: whether to claim again now, whether a failed
claim may have left jobs behind (and giving them back: `release_lost_claims`), and the poll that
claims anyway when no notification came."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from ..store._protocol import Store
from ._leases import Held

logger = logging.getLogger("starlette_jobs.worker")


@dataclass(eq=False)
class QueueState:
    name: str
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    # A claim failed: it may have committed on the server all the same (its answer was lost,
    # or it reached the server late). Until this time (the event loop's clock), every claim of
    # the queue is preceded by giving such jobs back.
    reconcile_until: float | None = None
    # False once a claim came back short: until a NOTIFY or a poll, a freed slot need not
    # trigger another claim.
    may_have_more: bool = True
    # The poll: while the claim loop waits (`waiting`), it claims anyway once `poll_at` (the
    # event loop's clock) has come, and `polled` tells it so. One timer serves many waits: it
    # is armed when a wait finds none, and when it fires early (it was armed for an earlier
    # wait) it is armed again for the wait in progress. An `asyncio.timeout` per wait cost
    # 4 us per claim (a timer handle made, then cancelled and left in the loop's heap).
    waiting: bool = False
    polled: bool = False
    poll_at: float = 0.0
    poll_timer: asyncio.TimerHandle | None = None
    stopped: bool = False

    async def wait(self, poll_interval: float) -> None:
        """Until the queue is woken, or `poll_interval` has passed (`polled` says which)."""
        loop = asyncio.get_running_loop()
        self.polled = False
        self.poll_at = loop.time() + poll_interval
        if self.poll_timer is None:
            self.poll_timer = loop.call_at(self.poll_at, self._poll)
        self.waiting = True
        try:
            await self.wake.wait()
        finally:
            self.waiting = False

    def stop_polling(self) -> None:
        self.stopped = True
        if self.poll_timer is not None:
            self.poll_timer.cancel()
            self.poll_timer = None

    def _poll(self) -> None:
        timer, self.poll_timer = self.poll_timer, None
        if not self.waiting or self.stopped:
            return  # the next wait arms it again
        if timer is not None and timer.when() < self.poll_at:
            # Armed for an earlier wait: this one began later.
            self.poll_timer = asyncio.get_running_loop().call_at(self.poll_at, self._poll)
            return
        self.polled = True
        self.wake.set()


async def release_lost_claims(
    store: Store, state: QueueState, worker_id: str, held: Callable[[], Held]
) -> None:
    """A claim of `state`'s queue failed on the client's side, yet may have committed: its jobs
    would sit `running` under a lease nobody renews, and lose an attempt at rescue without
    having run. Gives back every job of the queue held by `worker_id` under a token not among
    those it `held`. No other claim of this queue is in flight meanwhile (its claim loop makes
    them, and shutdown calls this once they are over)."""
    began = asyncio.get_running_loop().time()
    known = [token for _, token in held()]
    released = await store.release_unknown_claims(state.name, worker_id, known)
    if state.reconcile_until is not None and began > state.reconcile_until:
        state.reconcile_until = None
    if released:
        logger.warning(
            "queue %r: gave back %d job(s) of a claim whose answer was lost: %s",
            state.name, len(released), released,
        )  # fmt: skip
