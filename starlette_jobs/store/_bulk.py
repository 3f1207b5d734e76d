"""The part of the `Store` protocol that runs bulk actions (docs/dashboard.md, "Bulk actions"):
the record of one, and its batches, each of which changes its jobs, writes their events and
advances the record together."""

from __future__ import annotations

from typing import Protocol

from .._bulk_records import BulkFilter, BulkRecord


class BulkStore(Protocol):
    """Bulk actions over the jobs of a filter, in batches."""

    async def begin_bulk(self, action: str, filter: BulkFilter, by: str | None) -> BulkRecord:
        """Writes the record of a bulk action, unfinished: how many jobs it applies to now
        (`matched`), and the highest job id now (`upper_id`: it leaves later jobs out)."""
        ...

    async def bulk_batch(self, bulk_id: int, limit: int) -> BulkRecord | None:
        """Applies the action to the next `limit` jobs of its filter, by id, after `last_id`,
        with their events (`by` the record's), and advances the record (`done`, `last_id`, and
        `finished_at` once a batch finds fewer than `limit`), all at once. A job holding a
        unique key another live job holds is left as it is. Returns the record after, or None
        if there is no such record or it has finished."""
        ...

    async def get_bulk(self, bulk_id: int) -> BulkRecord | None: ...

    async def list_bulks(self, limit: int) -> list[BulkRecord]:
        """The latest bulk actions, latest first."""
        ...

    async def prune_bulks(self, retention_seconds: float) -> int:
        """Deletes the records of bulk actions that finished more than `retention_seconds`
        ago (an unfinished one is kept: it can be run on); returns how many."""
        ...
