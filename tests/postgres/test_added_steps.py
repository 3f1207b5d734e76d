"""Steps a running step adds, on PostgreSQL (`postgres/_added_steps.py`) where only PostgreSQL can
tell: an addition and the outcomes of the other steps a dependent waits for, written at the same
moment on other connections, never release the dependent without the added steps, nor twice;
two steps adding to one workflow at once take turns. What both stores share:
contract/test_added_steps_contract.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from starlette_jobs import EventKind, JobStatus, WorkflowDefinitionError
from starlette_jobs._attempt_records import Claim
from starlette_jobs._workflow_records import EnqueuedWorkflow, NewStep, NewWorkflow
from starlette_jobs.postgres._store import PostgresStore
from tests.records import outcome


@pytest.fixture
async def store(database_dsn: str) -> AsyncIterator[PostgresStore]:
    opened = await PostgresStore.open(database_dsn, min_size=1, max_size=4)
    yield opened
    await opened.close()


def step(name: str, queue: str, *upstream: int, payload: str = "{}") -> NewStep:
    return NewStep(
        step=name, name="tests.step", queue=queue, payload=payload, priority=0, max_attempts=1,
        upstream=upstream, allowed_failures=0,
    )  # fmt: skip


def graph(width: int) -> NewWorkflow:
    """`width` steps in queue "first", then "last", which waits for them all."""
    firsts = [step(f"first[{n}]", "first") for n in range(width)]
    last = step("last", "last", *range(width))
    return NewWorkflow.of("w", (*firsts, last), None)


async def test_an_addition_racing_the_other_outcomes_never_releases_early(
    store: PostgresStore, database_dsn: str
) -> None:
    writers = [await PostgresStore.open(database_dsn, min_size=1, max_size=2) for _ in range(3)]
    try:
        for _ in range(20):
            enqueued = await store.insert_workflow(graph(4))
            adder, *others = await store.claim_batch("first", 10, "w", 30)
            more = NewWorkflow.of("more", (step("a", "added"), step("b", "added")), None)

            async def finish(writer: PostgresStore, claim: Claim) -> None:
                assert await writer.record_outcomes([outcome(claim, JobStatus.SUCCEEDED)])

            added, *_ = await asyncio.gather(
                store.add_steps(adder.id, adder.lease_token, more),
                *(finish(w, c) for w, c in zip(writers, others, strict=True)),
            )
            assert isinstance(added, EnqueuedWorkflow)
            assert await store.record_outcomes([outcome(adder, JobStatus.SUCCEEDED)])
            last = enqueued.steps["last"]
            assert await store.job_status(last) is JobStatus.WAITING  # the added steps run
            claims = await store.claim_batch("added", 10, "w", 30)
            assert sorted(c.id for c in claims) == sorted(added.steps.values())
            await asyncio.gather(*(finish(w, c) for w, c in zip(writers, claims, strict=False)))
            kinds = [event.kind for event in await store.job_events(last)]
            assert kinds == [EventKind.ENQUEUED, EventKind.READY]  # released once, at the end
            (claim,) = await store.claim_batch("last", 10, "w", 30)
            assert await store.record_outcomes([outcome(claim, JobStatus.SUCCEEDED)])
    finally:
        for writer in writers:
            await writer.close()


async def test_two_steps_adding_one_name_at_once_take_turns(
    store: PostgresStore, database_dsn: str
) -> None:
    other = await PostgresStore.open(database_dsn, min_size=1, max_size=2)
    try:
        for _ in range(10):
            enqueued = await store.insert_workflow(graph(2))
            one, two = await store.claim_batch("first", 10, "w", 30)
            same = NewWorkflow.of("m", (step("x", "added"),), None)
            differs = NewWorkflow.of("m", (step("x", "added", payload='{"n": 1}'),), None)
            results = await asyncio.gather(
                store.add_steps(one.id, one.lease_token, same),
                other.add_steps(two.id, two.lease_token, differs),
                return_exceptions=True,
            )
            refused = [r for r in results if isinstance(r, WorkflowDefinitionError)]
            assert len(refused) == 1, results  # whichever came second
            record = await store.get_workflow(enqueued.id)
            assert record is not None
            assert [s.step for s in record.steps].count("x") == 1
            assert record["last"].waits_for == ("first[0]", "first[1]", "x")
    finally:
        await other.close()


async def test_a_workflow_cancelled_while_a_step_adds_cancels_the_steps_added(
    store: PostgresStore, database_dsn: str
) -> None:
    other = await PostgresStore.open(database_dsn, min_size=1, max_size=2)
    try:
        outcomes = set()
        for _ in range(20):
            enqueued = await store.insert_workflow(graph(1))
            (adder,) = await store.claim_batch("first", 10, "w", 30)
            more = NewWorkflow.of("m", (step("x", "added"),), None)
            added, _ = await asyncio.gather(
                store.add_steps(adder.id, adder.lease_token, more),
                other.cancel_workflow(enqueued.id),
                return_exceptions=True,
            )
            outcomes.add(type(added).__name__)
            record = await store.get_workflow(enqueued.id)
            assert record is not None
            left = {s.step: s.status for s in record.steps if s.step != "first[0]"}
            # Refused (the step was asked to stop), or added and cancelled with the rest.
            assert set(left.values()) == {JobStatus.CANCELLED}, (added, left)
            assert ("x" in left) == isinstance(added, EnqueuedWorkflow)
        assert outcomes <= {"EnqueuedWorkflow", "StepNotRunningError"}
    finally:
        await other.close()
