"""`worker/_drain.drain`: when it may say that nothing is left to run, on a real PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from starlette_jobs._attempt_records import Unfinished
from starlette_jobs.postgres._store import PostgresStore
from starlette_jobs.worker._drain import Draining, drain
from tests.records import new_jobs


@pytest.fixture
async def store(database_dsn: str) -> AsyncIterator[PostgresStore]:
    opened = await PostgresStore.open(database_dsn, min_size=1, max_size=2)
    yield opened
    await opened.close()


class _Outcomes:
    """The worker's outcome writer, as a drain sees it: nothing of its own to write here."""

    def __init__(self) -> None:
        self.written = asyncio.Event()

    async def flush(self) -> None:
        pass


async def _none_paused() -> set[str]:
    return set()


async def test_a_job_that_completed_itself_is_waited_for_until_its_code_has_returned(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job that wrote its own success (`complete_in`) is finished in the table while its code
    goes on. Claimed and completed between the drain's look at this process's attempts and its
    count of the table, it was counted finished, and the drain returned while it still ran
    (a test asserting what the job does after `complete_in` failed now and then)."""
    [job_id] = await store.insert_jobs(new_jobs())
    running = 0
    counted = asyncio.Event()
    original = store.count_unfinished

    async def count_as_the_attempt_completes(*args: Any, **kwargs: Any) -> Unfinished:
        nonlocal running
        if not counted.is_set():  # meanwhile, the worker claims it and the job completes itself
            [claim] = await store.claim_batch("default", 1, "w", 30.0)
            running = 1
            await store.complete_job(job_id, claim.lease_token, '"done"')
        left = await original(*args, **kwargs)
        counted.set()
        return left

    monkeypatch.setattr(store, "count_unfinished", count_as_the_attempt_completes)
    outcomes = _Outcomes()
    draining = asyncio.create_task(
        drain(
            store,
            Draining(
                queue_names=["default"],
                paused_queues=_none_paused,
                wake=lambda queue: None,
                running_count=lambda: running,
                outcomes=outcomes,  # type: ignore[arg-type]
                known_names=None,
            ),
            10,
            include_scheduled=True,
        )
    )
    await counted.wait()
    assert not draining.done(), "drained while the job's code still ran"
    running = 0  # its code returned
    outcomes.written.set()
    left = await draining
    assert left.waited == 0
