"""The queue controls of the in-memory store (docs/limits.md): pause and resume, the limits
workers declare, and the claim of a limited queue, as the PostgreSQL store has them, within one
process. `_store.MemoryStore` is built on it."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import timedelta

from .._queue import KEY_LIMIT_SCAN, QueueControls, QueueLimits
from .._records import Claim, EventKind
from ._rows import Row
from ._tables import MemoryTables, utc_now


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
        limits = controls.limits
        running = [row for row in self._running() if row.queue == queue]
        if limits.global_limit is not None:
            limit = max(0, min(limit, limits.global_limit - len(running)))
        if limits.key is None or limits.key_limit is None:
            return await self.claim_batch(queue, limit, worker_id, lease_seconds)
        per_key = Counter(_key_of(row, limits.key) for row in running)
        picked: list[Row] = []
        for row in self._due(queue, KEY_LIMIT_SCAN):
            if len(picked) >= limit:
                break
            key = _key_of(row, limits.key)
            if key is None or per_key[key] < limits.key_limit:
                picked.append(row)
                per_key[key] += 1
        now = utc_now()
        expires = now + timedelta(seconds=lease_seconds)
        claims = []
        for row in picked:
            claims.append(row.claim(worker_id, expires, now))
            self._changed(row, EventKind.CLAIMED, now)
        return claims

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


def _key_of(row: Row, argument: str) -> str | None:
    """The value of the job's argument as PostgreSQL's `payload ->> argument` gives it: a
    string as itself, any other value as its JSON text, a missing one or null as None."""
    value = json.loads(row.payload).get(argument)
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value)
