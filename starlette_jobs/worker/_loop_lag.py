"""The in-process worker's care for the web tier: it watches how late the event loop runs, and
starts fewer jobs while the loop falls behind.

A job that holds the event loop (a computation in an `async def`, a blocking call) delays every
request the same loop serves, and a worker that starts ten such jobs at once delays a request
by ten of them. The loop's lag, how late it runs a timer, is what a request waits for too: a
timer is due every `TICK` seconds while jobs run (`IDLE_TICK` while none does), and how late it
fires is one sample, of which only the jobs' share counts (`_loop_time`: the loop also runs late
for the app's own requests, and holding back jobs would not help them). While the smoothed lag
is above the target, each queue's limit halves
(never below one running job, so the drain always goes on); while it is below and the limit is
what holds the queue back (its claims come back as full as the limit let them be), the limit
grows again: up to just under the limit at which the loop fell behind, and past it only after
`PROBE_AFTER` samples on time, up to the queue's concurrency. Jobs already running are never
interrupted: a lower limit only holds back the next claims.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Mapping

logger = logging.getLogger("starlette_jobs.worker")

TICK = 0.02
"""Seconds between two lag samples while jobs run."""

IDLE_TICK = 0.1
"""Seconds between two samples while no job runs: each wakes the process (about 0.1 ms of CPU
on a small virtual machine), and an idle worker need not know the lag to the millisecond."""

RISE = 0.5
"""How much of a sample above the smoothed lag counts at once: a blocked loop is seen within
a tick or two."""

FALL = 0.2
"""How much of a sample below it counts: the limits grow back only once the loop has kept up
for a few ticks, not between two bursts."""


class LoopLag:
    """How late the event loop runs a timer, smoothed: quick to rise, slow to fall."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def add(self, sample: float) -> float:
        """Adds one sample (seconds late; a timer run early counts as on time) and returns the
        smoothed lag."""
        sample = max(sample, 0.0)
        weight = RISE if sample > self.seconds else FALL
        self.seconds += (sample - self.seconds) * weight
        return self.seconds


PROBE_AFTER = 500
"""Samples under the target before a queue tries again a limit at which the loop lagged (ten
seconds while jobs run): jobs that hold the loop stay at the limit that keeps it on time, and
try one more only now and then, so that a request rarely meets two of them in a row."""


class QueueLimits:
    """How many jobs each queue may run now: from one up to its concurrency, halved while the
    lag is above `target`, grown while below it and the limit is what holds the queue back, up
    to just under the limit at which the loop last lagged, and past it after `PROBE_AFTER`
    samples on time.

    A queue starts at one running job: a web app that starts with a backlog does not begin by
    starting a batch of jobs at once before the first sample says what they cost.
    """

    def __init__(self, concurrency: Mapping[str, int], target: float) -> None:
        self.target = target
        self._most = dict(concurrency)
        self.limits = dict.fromkeys(concurrency, 1)
        # The lowest limit at which the loop fell behind since the queue last tried its way up,
        # and how many samples have been on time since: growing straight back to that limit
        # would have the loop fall behind again every few ticks.
        self._too_many: dict[str, int | None] = dict.fromkeys(concurrency)
        self._on_time: dict[str, int] = dict.fromkeys(concurrency, 0)
        self._late = False  # whether the last sample was above the target
        # Queues whose claims the limit cut short since the last sample: quick jobs end before
        # a sample sees them run, yet their limit is what holds them back.
        self.held_back: set[str] = set()

    def observe(self, lag: float, running: Callable[[str], int]) -> list[str]:
        """Updates every queue's limit from the smoothed `lag`; returns the queues whose limit
        rose (they may claim again)."""
        raised = []
        was_late, late = self._late, lag > self.target
        self._late = late
        for queue, limit in self.limits.items():
            # The limit is what holds the queue back: as many jobs run as it allows, or a
            # claim came back as full as it let it be.
            at_limit = running(queue) >= limit or queue in self.held_back
            if late:
                # The limit the queue had when the loop fell behind (not its halves after), if
                # it ran that many: a queue with room to spare did not make the loop late.
                if not was_late and at_limit:
                    self._too_many[queue] = min(limit, self._too_many[queue] or limit)
                self.limits[queue] = max(1, limit // 2)
                self._on_time[queue] = 0
                continue
            self._on_time[queue] += 1
            if self._on_time[queue] >= PROBE_AFTER:
                self._too_many[queue] = None
            too_many = self._too_many[queue]
            ceiling = self._most[queue] if too_many is None else too_many - 1
            if limit < ceiling and at_limit:
                # A quarter more (at least one): from 1 to 100 in about 20 ticks.
                self.limits[queue] = min(ceiling, limit + max(1, limit // 4))
                raised.append(queue)
        self.held_back.clear()
        return raised


class LoopLagGuard:
    """How many jobs each queue may start now: with a target, it samples the running loop's
    lag every `TICK` seconds and keeps each queue's limit; without one, the limits are the
    queues' concurrency, and nothing is sampled.

    Args:
        concurrency: queue name -> the most jobs it may run.
        target: seconds of smoothed lag above which the limits shrink; None: never.
        running: how many jobs of a queue run now.
        raised: called with a queue whose limit rose, to wake its claim loop.
        held_by_jobs: seconds the jobs held the loop since it was last called (`_loop_time`): a
            sample counts in proportion. None: every sample counts whole.
    """

    def __init__(
        self,
        concurrency: Mapping[str, int],
        target: float | None,
        running: Callable[[str], int],
        raised: Callable[[str], None],
        held_by_jobs: Callable[[], float] | None = None,
    ) -> None:
        self.lag = LoopLag()
        self.limits = QueueLimits(concurrency, math.inf if target is None else target)
        if target is None:
            self.limits.limits = dict(concurrency)
        self._enabled = target is not None
        self._running = running
        self._raised = raised
        self._held_by_jobs = held_by_jobs
        self._sampled_at = 0.0  # the loop's time of the last sample
        self._timer: asyncio.TimerHandle | None = None
        self._holding_back = False

    def room(self, queue: str) -> int:
        """How many more jobs of `queue` may start now (0 or less: none)."""
        return self.limits.limits[queue] - self._running(queue)

    def held_back(self, queue: str) -> None:
        """`queue` had more jobs to claim than its limit let it: a claim cut short by the limit
        came back full. The limit is what holds the queue back, not the jobs' cost, even when
        (quick jobs) none of them runs when the next sample comes."""
        self.limits.held_back.add(queue)

    def start(self) -> None:
        if not self._enabled:
            return
        loop = asyncio.get_running_loop()
        self._sampled_at = loop.time()
        due = self._sampled_at + TICK
        self._timer = loop.call_at(due, self._tick, loop, due)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def observe(self, sample: float) -> None:
        """One lag sample, in seconds: updates the limits, and wakes the queues that may claim
        again."""
        lag = self.lag.add(sample)
        for queue in self.limits.observe(lag, self._running):
            self._raised(queue)
        holding_back = lag > self.limits.target
        if holding_back != self._holding_back:
            self._holding_back = holding_back
            logger.debug(
                "event loop lag %.1f ms %s the %.1f ms target: %s; limits %s",
                lag * 1000,
                "above" if holding_back else "back under",
                self.limits.target * 1000,
                "starting fewer jobs" if holding_back else "starting more again",
                self.limits.limits,
            )

    def _tick(self, loop: asyncio.AbstractEventLoop, due: float) -> None:
        now = loop.time()
        # Quick jobs have ended before the tick, but a queue they hold back is busy too.
        busy = bool(self.limits.held_back) or any(map(self._running, self.limits.limits))
        late = now - due
        if self._held_by_jobs is not None:
            # The timer came due while a job held the loop about as often as the jobs held it
            # since the last sample: that share of the lateness is theirs, the rest the app's.
            since = max(now - self._sampled_at, 1e-9)
            late *= min(1.0, self._held_by_jobs() / since)
        self._sampled_at = now
        self.observe(late)
        # From now, not from `due`: a loop that was blocked gets one late sample, not a burst.
        due = now + (TICK if busy else IDLE_TICK)
        self._timer = loop.call_at(due, self._tick, loop, due)
