"""Giving running jobs back on PostgreSQL, their attempt returned: a stopping worker's
(`release_jobs`), an operator's (`release_job`, `release_worker_jobs`), and a claim whose answer
the worker never heard (`release_unknown_claims`). A job asked to stop ends cancelled instead;
a workflow's step so cancelled has the steps waiting for it told at once (`_settle_after_commit`),
as a cancel does. `_store.PostgresStore` is built on it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from ._workflows import WorkflowStatements


class ReleaseStatements(WorkflowStatements):
    """`WorkflowStatements` with the protocol's methods that give running jobs back."""

    async def release_unknown_claims(
        self, queue: str, worker_id: str, known: Sequence[UUID]
    ) -> list[int]:
        """Gives back, attempt included, the jobs of `queue` that this worker holds under a
        lease token it does not know: a claim that committed after its answer was lost."""
        rows = await self._worker_write(
            "fetch", self._q["release_unknown_claims"], queue, worker_id, list(known),
            self.record_events,
        )  # fmt: skip
        await self._settle_cancelled(rows)
        return [row[0] for row in rows]

    async def release_jobs(self, held: Sequence[tuple[int, UUID]]) -> set[int]:
        ids, tokens = zip(*held, strict=True)
        rows = await self._worker_write(
            "fetch", self._q["release_jobs"], ids, tokens, self.record_events
        )
        await self._settle_cancelled(rows)
        return {row[0] for row in rows}

    async def release_job(self, job_id: int, by: str | None = None) -> bool:
        row = await self._write("fetchrow", self._q["release_job"], job_id, self.record_events, by)
        if row is None:
            return False
        await self._settle_cancelled([row])
        return True

    async def release_worker_jobs(self, worker_id: str) -> list[int]:
        rows = await self._write(
            "fetch", self._q["release_worker_jobs"], worker_id, self.record_events
        )
        await self._settle_cancelled(rows)
        return [row[0] for row in rows]

    async def _settle_cancelled(self, rows: Sequence[Any]) -> None:
        """Tells the steps waiting for those of `rows` that ended cancelled (`owed`)."""
        if any(row["owed"] for row in rows):
            await self._settle_after_commit()
