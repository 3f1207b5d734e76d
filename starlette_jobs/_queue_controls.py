"""`QueueControlling`: pausing and resuming queues, and reading their controls, from any process
(docs/limits.md), over whatever `Store` the `Jobs` it belongs to has started."""

from __future__ import annotations

from ._errors import unavailable_as_error
from ._options import check_queue_name
from ._queue import QueueControls
from .store._protocol import Store


class QueueControlling:
    """The part of `Jobs` that pauses, resumes and reads queues; `Jobs` supplies the store."""

    @property
    def _ready_store(self) -> Store:
        raise NotImplementedError

    async def pause(self, queue: str) -> None:
        """Pauses `queue` for every worker, wherever it runs: none claims its jobs from now on
        (each hears of it at once, or within a poll interval should the notification be lost),
        until `resume(queue)`. Jobs running go on to their end; enqueueing goes on. The pause
        is kept in the database: it outlasts restarts and deploys.

        Example:
            >>> await jobs.pause("emails")
        """
        with unavailable_as_error(f"pause queue {queue!r}"):
            await self._ready_store.set_paused(check_queue_name(queue), True)

    async def resume(self, queue: str) -> None:
        """Lets every worker claim the jobs of `queue` again (see `pause`); nothing happens
        to a queue that is not paused."""
        with unavailable_as_error(f"resume queue {queue!r}"):
            await self._ready_store.set_paused(check_queue_name(queue), False)

    async def queue_controls(self, queue: str) -> QueueControls:
        """Whether `queue` is paused, and the limits its workers obey (the last worker to
        start declared them)."""
        with unavailable_as_error(f"read the controls of queue {queue!r}"):
            found = await self._ready_store.queue_controls([check_queue_name(queue)])
        return found[queue]
