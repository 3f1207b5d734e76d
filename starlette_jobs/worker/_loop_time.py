"""How long jobs hold the event loop: what the loop-lag guard (`_loop_lag`) holds against them.

The loop runs late for many reasons: the app's own requests, a garbage collection, another
process on the core. Only the part the jobs caused is theirs to pay for: a job that awaits an
HTTP call holds the loop for microseconds, and starting fewer of them while a burst of requests
makes the loop late would slow the jobs and help no request. So each step of an `async def`
job (from one `await` that suspends it to the next) is timed, and a lag sample counts against
the jobs in proportion to the share of the time since the previous sample that they held the
loop: the timer came due in a job about that often.

A plain `def` job runs in a thread, and holds the loop in another way: while it computes, it
holds the GIL, and the loop's thread waits for it. Its time cannot be measured from here, so a
sample taken while such a thread runs, or after one ended, counts whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class JobLoopTime:
    """The time jobs held the event loop since `take` was last called. Used on the loop's
    thread only, but for `counting_thread`'s threads, which tell it through the loop."""

    __slots__ = ("_seconds", "threads")

    def __init__(self) -> None:
        self._seconds = 0.0
        self.threads = 0
        """Sync jobs whose thread runs now (a job cancelled or timed out may leave its thread
        running: it counts until the thread ends)."""

    def add(self, seconds: float) -> None:
        self._seconds += seconds

    def take(self) -> float:
        """Seconds the jobs held the loop since the last call (infinite if a sync job ran)."""
        held = math.inf if self.threads else self._seconds
        self._seconds = 0.0
        return held

    def counting_thread(self, func: Callable[..., T]) -> Callable[..., T]:
        """`func`, to run in a thread, counted from the moment the thread starts it to the
        moment it returns, whatever became of the job that awaited it."""
        loop = asyncio.get_running_loop()

        def counted(*args: Any, **kwargs: Any) -> T:
            _tell(loop, self._thread_started)
            try:
                return func(*args, **kwargs)
            finally:
                _tell(loop, self._thread_ended)

        return counted

    def _thread_started(self) -> None:
        self.threads += 1

    def _thread_ended(self) -> None:
        self.threads -= 1
        self._seconds = math.inf  # it held the GIL for an unknown part of the interval


def _tell(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    with contextlib.suppress(RuntimeError):  # the loop closed: nobody is counting any more
        loop.call_soon_threadsafe(callback)


def timed(coroutine: Coroutine[Any, Any, T], loop_time: JobLoopTime) -> Awaitable[T]:
    """Awaits `coroutine`, an `async def` job's run, adding the time each of its steps takes
    to `loop_time`. Work it hands to other tasks (`asyncio.gather`, a `TaskGroup`,
    `asyncio.wait_for` before Python 3.12) or to callbacks is not counted."""
    return _Timed(coroutine, loop_time)


class _Timed(Generic[T]):
    """An awaitable that runs a coroutine step by step as `await` would (what it is sent,
    thrown or closed with is passed on), timing each step."""

    __slots__ = ("_coroutine", "_loop_time")

    def __init__(self, coroutine: Coroutine[Any, Any, T], loop_time: JobLoopTime) -> None:
        self._coroutine = coroutine
        self._loop_time = loop_time

    def __await__(self) -> Generator[Any, Any, T]:
        coroutine, add, clock = self._coroutine, self._loop_time.add, time.perf_counter
        value: Any = None
        error: BaseException | None = None
        while True:
            started = clock()
            try:
                suspended_on = coroutine.send(value) if error is None else coroutine.throw(error)
            except StopIteration as returned:
                add(clock() - started)
                result: T = returned.value
                return result
            except BaseException:
                add(clock() - started)
                raise
            add(clock() - started)
            value, error = None, None
            try:
                value = yield suspended_on
            except GeneratorExit:
                coroutine.close()
                raise
            except BaseException as thrown:  # e.g. the task's CancelledError: the job's to handle
                # Passed on as it came: without the frame of this `yield`, which the job's
                # traceback (and the error stored for it) would show as where it was raised.
                traceback = thrown.__traceback__
                error = thrown.with_traceback(None if traceback is None else traceback.tb_next)
