"""`jobs.begin_bulk` and `jobs.run_bulk`: what they refuse before asking the store (the batches
themselves: contract/test_bulk_contract.py, on both stores)."""

from __future__ import annotations

import pytest

from starlette_jobs import JobDefinitionError, Jobs


async def test_a_bulk_action_needs_a_known_action_a_queue_and_a_sane_batch() -> None:
    async with Jobs("memory://", queues={}) as jobs:
        with pytest.raises(ValueError, match="action must be 'retry' or 'cancel'"):
            await jobs.begin_bulk("delete", queue="emails")  # type: ignore[arg-type]
        with pytest.raises(JobDefinitionError, match="invalid queue name"):
            await jobs.begin_bulk("retry", queue="")
        with pytest.raises(ValueError, match="is not a valid JobStatus"):
            await jobs.begin_bulk("retry", queue="emails", status="broken")
        with pytest.raises(ValueError, match="batch_size must be an integer from 1 to 10000"):
            await jobs.run_bulk(1, batch_size=0)
        record = await jobs.begin_bulk("cancel", queue="emails", by="ada")
        assert (record.matched, record.by) == (0, "ada")
        end = await jobs.run_bulk(record.id)
        assert end is not None
        assert (end.done, end.finished) == (0, True)
