"""The queue controls of the in-memory store (docs/limits.md): pause and resume, the limits
workers declare, and the claim of a limited queue, as the PostgreSQL store has them, within one
process. `_store.MemoryStore` is built on it."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import timedelta
from uuid import UUID

from .._attempt_records import Claim
from .._queue import KEY_LIMIT_SCAN, QueueControls, QueueLimits
from .._records import EventKind
from ._jsonb import jsonb_field_text
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
        self,
        queue: str,
        limit: int,
        worker_id: str,
        lease_seconds: float,
        ended: Sequence[UUID] = (),
        names: Sequence[str] | None = None,
    ) -> list[Claim]:
        controls = self._controls(queue)
        if controls.paused:
            return []
        limits, now = controls.limits, utc_now()
        gone = set(ended)
        running = [r for r in self._running() if r.queue == queue and r.lease_token not in gone]
        if limits.global_limit is not None:
            limit = min(limit, limits.global_limit - len(running))
        # A start "after now" was recorded before the clock was set back: as on PostgreSQL,
        # dropped, neither counted (the queue would stall until then) nor kept.
        starts = [at for at in self.data.recent_starts.get(queue, []) if at <= now]
        if limits.rate_limit is not None:
            window = now - timedelta(seconds=limits.rate_period)
            limit = min(limit, limits.rate_limit - sum(1 for at in starts if at > window))
        picked = self._due(queue, max(limit, 0), names=names)  # what `claim_batch` would take
        if limits.key is not None and limits.key_limit is not None:
            first_due = self._due(queue, KEY_LIMIT_SCAN, names=names)
            picked = _within_key_limit(first_due, running, limits.key, limits.key_limit, limit)
        expires = now + timedelta(seconds=lease_seconds)
        claims = []
        for row in picked:
            claims.append(row.claim(worker_id, expires, now))
            self._changed(row, EventKind.CLAIMED, now)
        if limits.rate_limit is not None and claims:
            kept = [*starts, *[now] * len(claims)][-limits.rate_limit :]
            self.data.recent_starts[queue] = kept
        elif limits.rate_limit is None and claims:
            # As PostgreSQL does: a claim under no rate limit forgets the starts counted before.
            self.data.recent_starts.pop(queue, None)
        return claims

    async def wake_queues(self, queues: Sequence[str]) -> None:
        for queue in queues:
            self._notify(queue)

    def _controls(self, queue: str) -> QueueControls:
        return self.data.queues.get(queue) or QueueControls(queue)

    def _set_controls(self, queue: str, **changes: object) -> None:
        self.data.queues[queue] = dataclasses.replace(self._controls(queue), **changes)  # type: ignore[arg-type]
        for listener in list(self._listeners):
            listener.controls_changed(queue)


def _within_key_limit(
    due: list[Row], running: list[Row], key: str, key_limit: int, limit: int
) -> list[Row]:
    """The first `limit` of `due` that leave at most `key_limit` running per value of `key`."""
    per_key = Counter(_key_of(row, key) for row in running)
    picked: list[Row] = []
    for row in due:
        if len(picked) >= limit:
            break
        value = _key_of(row, key)
        if value is None or per_key[value] < key_limit:
            picked.append(row)
            per_key[value] += 1
    return picked


def _key_of(row: Row, argument: str) -> str | None:
    """The value of the job's argument as PostgreSQL's `payload ->> argument` gives it."""
    return jsonb_field_text(row.payload, argument)
