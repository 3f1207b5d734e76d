"""The queue controls of the PostgreSQL store (docs/limits.md): pause and resume, the limits
workers declare, and the claim of a limited queue, on the `starlette_jobs_queues` rows.
`_store.PostgresStore` is built on it."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from .._attempt_records import Claim
from .._errors import JobDefinitionError
from .._queue import KEY_LIMIT_SCAN, QueueControls, QueueLimits
from ._connected import ConnectedStore
from ._driver_errors import raise_as_store_error

logger = logging.getLogger("starlette_jobs.store")


class ControlledStore(ConnectedStore):
    """`ConnectedStore` with the protocol's queue controls."""

    # The rows written by hand that no `Queue` could declare, each logged once.
    _told_bad_rows: set[str] | None = None

    async def set_paused(self, queue: str, paused: bool) -> None:
        await self._write("execute", self._q["set_queue_paused"], queue, paused)

    async def declare_queues(self, limits: Mapping[str, QueueLimits]) -> None:
        names = sorted(limits)  # every worker locks the rows in one order: no deadlock
        try:
            # A row held elsewhere (an operator's session) is not waited for: this runs as a
            # worker starts, which would wait the statement timeout, then take it for an outage.
            async with self._shared.transaction(self.worker_statement_timeout) as connection:
                await connection.execute(self._q["brief_lock_waits"])
                await connection.execute(
                    self._q["declare_queues"],
                    names,
                    [limits[name].global_limit for name in names],
                    [limits[name].key for name in names],
                    [limits[name].key_limit for name in names],
                    [limits[name].rate_limit for name in names],
                    [limits[name].rate_period for name in names],
                )
        except Exception as error:
            raise_as_store_error(error, schema=self.schema)

    async def queue_controls(self, queues: Sequence[str]) -> dict[str, QueueControls]:
        rows = await self._read("fetch", self._q["queue_controls"], list(queues))
        found = {row[0]: self._controls_of(tuple(row)) for row in rows}
        return {queue: found.get(queue) or QueueControls(queue) for queue in queues}

    def _controls_of(self, row: tuple[Any, ...]) -> QueueControls:
        """The row as controls. A row that no `Queue` could declare (written by hand: a limit of
        0, a period of 0) stops the queue's claims, as a pause would, and says why once: one bad
        row must neither run the queue unlimited nor stop the workers reading the others."""
        name, paused, *limits = row
        try:
            return QueueControls(name, paused, QueueLimits(*limits))
        except JobDefinitionError as error:
            if self._told_bad_rows is None:
                self._told_bad_rows = set()
            # By its text: a NaN read again is not equal to the NaN read before.
            told = repr(row)
            if told not in self._told_bad_rows:
                self._told_bad_rows.add(told)
                logger.error(
                    "queue %r: its row in starlette_jobs_queues holds limits no Queue could "
                    "declare (%s): no worker claims its jobs until the row is fixed or a "
                    "worker declares the queue again", name, error,
                )  # fmt: skip
            return QueueControls(name, paused=True)

    async def claim_limited_batch(
        self,
        queue: str,
        limit: int,
        worker_id: str,
        lease_seconds: float,
        ended: Sequence[UUID] = (),
        names: Sequence[str] | None = None,
    ) -> list[Claim]:
        claiming = (
            *(queue, limit, worker_id, lease_seconds, KEY_LIMIT_SCAN),
            list(ended), names,
        )  # fmt: skip
        rows = await self._claimer.fetch(self._q["claim_limited_batch"], *claiming)
        if not rows or not rows[0]["stale"]:
            return [Claim(*row[:-1]) for row in rows]
        # Another claim of the queue committed while this one waited for its turn: claim again
        # in a transaction that takes the turn first.
        timeout = self.worker_statement_timeout
        try:
            async with self._shared.transaction(timeout) as connection:
                await connection.execute(self._q["lock_queue"], queue)
                rows = await connection.fetch(self._q["claim_limited_batch"], *claiming)
        except Exception as error:
            raise_as_store_error(error, schema=self.schema)
        return [Claim(*row[:-1]) for row in rows if not row["stale"]]

    async def wake_queues(self, queues: Sequence[str]) -> None:
        await self._worker_write("execute", self._q["wake_queues"], list(queues))
