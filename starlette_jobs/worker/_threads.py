"""The sync jobs' threads running in this process. A job's thread outlives its attempt's task
when the task is cancelled (shutdown) or times out, since nothing can stop a thread, and the
interpreter waits for it before it exits: shutdown counts them, and waits a little for them to
return (`_shutdown.py`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_running: set[object] = set()
_listeners: set[Callable[[], None]] = set()


def tracked(func: Callable[..., T]) -> Callable[..., T]:
    """`func`, to run in a thread: among `job_threads_running()` from the moment the thread
    starts it until the event loop hears that it returned. Made on the event loop."""
    loop = asyncio.get_running_loop()

    def run(*args: Any, **kwargs: Any) -> T:
        thread = object()
        _running.add(thread)  # one call, atomic: the event loop may be counting
        try:
            return func(*args, **kwargs)
        finally:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody counts
                loop.call_soon_threadsafe(_returned, thread)

    return run


def _returned(thread: object) -> None:
    _running.discard(thread)
    for listener in list(_listeners):
        listener()


def job_threads_running() -> int:
    """How many sync jobs' threads run now in this process, their attempts ended or not."""
    return len(_running)


@contextlib.contextmanager
def told_when_a_thread_returns(listener: Callable[[], None]) -> Iterator[None]:
    """Within the block, `listener` is called on the event loop each time a job's thread
    returns."""
    _listeners.add(listener)
    try:
        yield
    finally:
        _listeners.discard(listener)
