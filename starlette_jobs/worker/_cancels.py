"""Stopping an attempt safely: a task is cancelled only once it has started (before that, the
stop is a mark the attempt reads as it starts), and a cancel request that overtakes the claim's
answer is remembered until the claim is seen."""

from __future__ import annotations

import asyncio
from uuid import UUID

from .._errors import UnknownJobError
from .._job import registered_job
from ._context import AttemptControl


def cancel_started(
    task: asyncio.Task[None], control: AttemptControl | None, message: str | None = None
) -> None:
    """Cancels an attempt's task once it has started. A task cancelled before its first step
    never runs its coroutine, so the attempt's clean-up (its bookkeeping, its outcome) would
    never run either: until then the stop stays a mark on `control`, which the attempt reads
    as it starts."""
    if control is None or control.started:
        task.cancel(message)


class EarlyCancels:
    """Lease tokens whose cancel request came before this worker knew the token: a claim
    commits before its answer reaches the worker, and `jobs.cancel`'s notification, on another
    connection, can arrive first. Kept `horizon` seconds (the longest a claim's answer can
    take: a statement timeout), so that every worker remembering every other worker's requests
    stays small; the heartbeat catches a request that comes later still."""

    def __init__(self, horizon: float) -> None:
        self.drain_horizon = horizon
        self._received: dict[UUID, float] = {}

    def add(self, token: UUID) -> None:
        now = asyncio.get_running_loop().time()
        # Oldest first (insertion order): drop those past the horizon.
        while self._received:
            oldest, at = next(iter(self._received.items()))
            if now - at <= self.drain_horizon:
                break
            del self._received[oldest]
        self._received[token] = now

    def pop(self, token: UUID) -> bool:
        """Whether a cancel request for `token` came (and is still remembered); forgets it."""
        return self._received.pop(token, None) is not None


def is_async_job(name: str) -> bool:
    """Whether the job named `name` runs on the event loop, where a cancel can stop it (a sync
    job runs in a thread, which nothing can interrupt)."""
    try:
        return registered_job(name).is_async
    except UnknownJobError:
        return True  # never started: nothing runs in a thread
