"""The queue controls of the in-memory store (docs/limits.md): pause and resume, the limits
workers declare, and the claim of a limited queue, as the PostgreSQL store has them, within one
process. `_store.MemoryStore` is built on it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from .._queue import QueueControls, QueueLimits
from .._records import Claim
from ._tables import MemoryTables


class MemoryControls(MemoryTables):
    """`MemoryTables` with the protocol's queue controls."""

    async def set_paused(self, queue: str, paused: bool) -> None:
        self._set_controls(queue, paused=paused)

    async def declare_queues(self, limits: Mapping[str, QueueLimits]) -> None:
        for queue, declared in limits.items():
            if self._controls(queue).limits != declared:
                self._set_controls(queue, limits=declared)

    async def queue_controls(self, queues: Sequence[str]) -> dict[str, QueueControls]:
        return {queue: self._controls(queue) for queue in queues}

    async def claim_limited_batch(
        self, queue: str, limit: int, worker_id: str, lease_seconds: float
    ) -> list[Claim]:
        controls = self._controls(queue)
        if controls.paused:
            return []
        most = controls.limits.global_limit
        if most is not None:
            running = sum(1 for row in self._running() if row.queue == queue)
            limit = max(0, min(limit, most - running))
        return await self.claim_batch(queue, limit, worker_id, lease_seconds)

    async def claim_batch(
        self, queue: str, limit: int, worker_id: str, lease_seconds: float
    ) -> list[Claim]:
        raise NotImplementedError  # `MemoryStore`'s

    async def wake_queues(self, queues: Sequence[str]) -> None:
        for queue in queues:
            self._notify(queue)

    def _controls(self, queue: str) -> QueueControls:
        return self.data.queues.get(queue) or QueueControls(queue)

    def _set_controls(self, queue: str, **changes: object) -> None:
        self.data.queues[queue] = dataclasses.replace(self._controls(queue), **changes)  # type: ignore[arg-type]
        for listener in list(self._listeners):
            listener.controls_changed(queue)
