"""The queue controls of the PostgreSQL store (docs/limits.md): pause and resume, the limits
workers declare, and the claim of a limited queue, on the `starlette_jobs_queues` rows.
`_store.PostgresStore` is built on it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from uuid import UUID

from .._queue import KEY_LIMIT_SCAN, QueueControls, QueueLimits
from .._records import Claim
from ._connected import ConnectedStore
from ._connections import raise_as_store_error


class ControlledStore(ConnectedStore):
    """`ConnectedStore` with the protocol's queue controls."""

    async def set_paused(self, queue: str, paused: bool) -> None:
        await self._write("execute", self._q["set_queue_paused"], queue, paused)

    async def declare_queues(self, limits: Mapping[str, QueueLimits]) -> None:
        names = sorted(limits)  # every worker locks the rows in one order: no deadlock
        await self._worker_write(
            "execute",
            self._q["declare_queues"],
            names,
            [limits[name].global_limit for name in names],
            [limits[name].key for name in names],
            [limits[name].key_limit for name in names],
            [limits[name].rate_limit for name in names],
            [limits[name].rate_period for name in names],
        )

    async def queue_controls(self, queues: Sequence[str]) -> dict[str, QueueControls]:
        rows = await self._read("fetch", self._q["queue_controls"], list(queues))
        found = {row[0]: QueueControls(row[0], row[1], QueueLimits(*row[2:])) for row in rows}
        return {queue: found.get(queue) or QueueControls(queue) for queue in queues}

    async def claim_limited_batch(
        self,
        queue: str,
        limit: int,
        worker_id: str,
        lease_seconds: float,
        ended: Sequence[UUID] = (),
    ) -> list[Claim]:
        claiming = (
            *(queue, limit, worker_id, lease_seconds, self.record_events, KEY_LIMIT_SCAN),
            list(ended),
        )
        rows = await self._claimer.fetch(self._q["claim_limited_batch"], *claiming)
        if not rows or not rows[0]["stale"]:
            return [Claim(*row[:-1]) for row in rows]
        # Another claim of the queue committed while this one waited for its turn: claim again
        # in a transaction that takes the turn first.
        timeout = self.worker_statement_timeout
        try:
            async with self.pool.acquire() as connection, connection.transaction():
                await connection.execute(self._q["lock_queue"], queue, timeout=timeout)
                rows = await connection.fetch(
                    self._q["claim_limited_batch"], *claiming, timeout=timeout
                )
        except Exception as error:
            raise_as_store_error(error)
        return [Claim(*row[:-1]) for row in rows if not row["stale"]]

    async def wake_queues(self, queues: Sequence[str]) -> None:
        await self._worker_write("execute", self._q["wake_queues"], list(queues))
