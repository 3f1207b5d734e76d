"""The sync jobs' threads one worker started. A job's thread outlives its attempt's task when
the task is cancelled (shutdown) or times out, since nothing can stop a thread, and the
interpreter waits for it before it exits: shutdown counts them, and waits a little for them to
return (`_shutdown.py`). Each worker counts its own: another app's worker in the same process
runs its jobs' threads for as long as they take."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


class JobThreads:
    """The threads of one worker's sync jobs that have not returned yet."""

    __slots__ = ("_listeners", "_running")

    def __init__(self) -> None:
        self._running: set[object] = set()
        self._listeners: set[Callable[[], None]] = set()

    def tracked(self, func: Callable[..., T]) -> Callable[..., T]:
        """`func`, to run in a thread: among `running()` from the moment the thread starts it
        until the event loop hears that it returned. Made on the event loop."""
        loop = asyncio.get_running_loop()
        running, returned = self._running, self._returned

        def run(*args: Any, **kwargs: Any) -> T:
            thread = object()
            running.add(thread)  # one call, atomic: the event loop may be counting
            try:
                return func(*args, **kwargs)
            finally:
                with contextlib.suppress(RuntimeError):  # the loop closed: nobody counts
                    loop.call_soon_threadsafe(returned, thread)

        return run

    def _returned(self, thread: object) -> None:
        self._running.discard(thread)
        for listener in list(self._listeners):
            listener()

    def running(self) -> int:
        """How many of the threads run now, their attempts ended or not."""
        return len(self._running)

    @contextlib.contextmanager
    def told_when_one_returns(self, listener: Callable[[], None]) -> Iterator[None]:
        """Within the block, `listener` is called on the event loop each time one of the
        threads returns."""
        self._listeners.add(listener)
        try:
            yield
        finally:
            self._listeners.discard(listener)
