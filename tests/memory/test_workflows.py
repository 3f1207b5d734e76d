"""Workflows in the in-memory store (`memory/_workflows.py`) where it differs from PostgreSQL:
it cannot join a caller's transaction. The rest is the contract suite's
(contract/test_workflows_contract.py); here, a step a rescue failed, told by `settle_steps`."""

from __future__ import annotations

import asyncio

import pytest

from starlette_jobs import JobStatus, MemoryStoreUnsupportedError
from starlette_jobs._workflow_records import NewStep, NewWorkflow
from starlette_jobs.memory._store import MemoryStore


def two_steps(max_attempts: int = 1) -> NewWorkflow:
    first = NewStep(
        step="first", name="tests.a", queue="q", payload="{}", priority=0,
        max_attempts=max_attempts, upstream=(), allowed_failures=0,
    )  # fmt: skip
    second = NewStep(
        step="second", name="tests.b", queue="q", payload="{}", priority=0, max_attempts=1,
        upstream=(0,), allowed_failures=0,
    )  # fmt: skip
    return NewWorkflow.of("w", [first, second], trace_context=None)


async def test_a_callers_transaction_is_refused() -> None:
    with pytest.raises(MemoryStoreUnsupportedError, match="connection="):
        await MemoryStore().insert_workflow(two_steps(), connection=object())


async def test_a_step_failed_by_a_rescue_is_told_by_settle_steps() -> None:
    store = MemoryStore()
    enqueued = await store.insert_workflow(two_steps())
    await store.claim_batch("q", 10, "w", 0.001)
    await asyncio.sleep(0.01)  # the lease runs out: what a crashed worker leaves
    assert [s for _, _, s in await store.rescue_expired(10)] == [JobStatus.FAILED]
    assert await store.job_status(enqueued.steps["second"]) is JobStatus.WAITING
    assert await store.settle_steps() == 1
    assert await store.job_status(enqueued.steps["second"]) is JobStatus.CANCELLED
    assert await store.settle_steps() == 0
    assert await store.upstream_results(enqueued.steps["first"]) == []
    assert await store.get_workflow(enqueued.id + 1) is None
