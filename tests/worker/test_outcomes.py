"""Group commit of outcomes, on the in-memory store: fenced writes, held leases, flushing, and
no outcome holding up the others. Values PostgreSQL refuses: integration/test_faults.py."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

import pytest

from starlette_jobs import DatabaseUnavailableError, JobStatus
from starlette_jobs._attempt_records import Claim, Outcome
from starlette_jobs._errors import DatabaseTooSlowError
from starlette_jobs._storable import (
    MAX_ERROR_LENGTH,
    MAX_OUTCOME_LENGTH,
    MAX_PROGRESS_BYTES,
    MAX_RESULT_BYTES,
    MAX_STATEMENT_LENGTH,
)
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.worker import _outcomes as outcomes_module
from starlette_jobs.worker._outcomes import OutcomeWriter
from tests.records import new_jobs, outcome


def succeeded(claim: Claim) -> Outcome:
    return outcome(claim, JobStatus.SUCCEEDED, result='"done"')


async def test_outcomes_added_together_are_written_and_their_leases_held_until_then() -> None:
    store = MemoryStore()
    await store.insert_jobs(new_jobs(3))
    claims = await store.claim_batch("default", 3, "w", 30)
    writer = OutcomeWriter(store)
    for claim in claims:
        writer.add(succeeded(claim))
    # Not written yet: the worker keeps renewing these leases meanwhile.
    assert sorted(writer.held()) == sorted((c.id, c.lease_token) for c in claims)
    writer.start()
    await writer.flush()
    assert writer.held() == []
    for claim in claims:
        record = await store.get_job(claim.id)
        assert record is not None
        assert (record.status, record.result) == (JobStatus.SUCCEEDED, "done")
    await writer.stop(timeout=1)


async def test_an_outcome_whose_lease_is_lost_is_not_written() -> None:
    store = MemoryStore()
    await store.insert_jobs(new_jobs(3))
    [stale, *_] = await store.claim_batch("default", 3, "w", 30)
    assert await store.release_job(stale.id)  # an operator took it back
    writer = OutcomeWriter(store)
    writer.start()
    writer.add(succeeded(stale))
    await writer.flush()
    await writer.stop(timeout=1)
    record = await store.get_job(stale.id)
    assert record is not None
    assert (record.status, record.result) == (JobStatus.PENDING, None)


class SlowWithLargeValues(MemoryStore):
    """What PostgreSQL under a short statement timeout does with a statement that carries more
    than `most` characters of values: runs past the timeout, every time it is tried."""

    def __init__(self, most: int) -> None:
        super().__init__()
        self.most = most
        self.statements: list[list[int]] = []
        """The ids each `record_outcomes` carried, written or not."""

    async def record_outcomes(self, outcomes: Sequence[Outcome]) -> set[int]:
        self.statements.append([o.id for o in outcomes])
        values = [v for o in outcomes for v in (o.result, o.progress, o.error) if v is not None]
        if sum(map(len, values)) > self.most:
            raise DatabaseUnavailableError("no answer")  # taken for an outage
        return await super().record_outcomes(outcomes)


async def write(store: MemoryStore, *outcomes: Outcome) -> None:
    """Writes `outcomes` in one batch, as outcomes that end together are."""
    writer = OutcomeWriter(store)
    for each in outcomes:
        writer.add(each)
    writer.start()
    try:
        async with asyncio.timeout(10):  # a bound on a hang, not a measure
            await writer.flush()
    finally:
        await writer.stop(timeout=0)


async def results(store: MemoryStore, claims: list[Claim]) -> list[tuple[JobStatus, object]]:
    records = [await store.get_job(claim.id) for claim in claims]
    return [(r.status, r.result) for r in records if r is not None]


def test_the_bounds_hold_every_outcome_a_job_can_make() -> None:
    # A result and a progress at their largest (a character is at least a byte) and an error
    # text with the prefix of a cancelled attempt: within the writer's bound, never stripped.
    largest = MAX_RESULT_BYTES + MAX_PROGRESS_BYTES + MAX_ERROR_LENGTH + 100
    assert largest <= MAX_OUTCOME_LENGTH <= MAX_STATEMENT_LENGTH


async def test_an_outcome_holding_more_than_a_job_can_make_is_written_without_its_values(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Such a value would make the statement slow enough to be taken for an outage: the whole
    # batch would be retried for ever, the other jobs' outcomes with it.
    store = SlowWithLargeValues(most=MAX_STATEMENT_LENGTH)
    await store.insert_jobs(new_jobs(3))
    first, huge, last = await store.claim_batch("default", 3, "w", 30)
    too_much = "[" + "1," * MAX_OUTCOME_LENGTH + "1]"
    await write(
        store,
        succeeded(first),
        dataclasses.replace(succeeded(huge), progress=too_much),
        succeeded(last),
    )
    assert await results(store, [first, huge, last]) == [
        (JobStatus.SUCCEEDED, "done"),
        (JobStatus.SUCCEEDED, None),
        (JobStatus.SUCCEEDED, "done"),
    ]
    record = await store.get_job(huge.id)
    assert record is not None
    assert (record.attempts, record.progress) == (1, None)
    assert any(f"job {huge.id}: outcome holds" in m for m in caplog.messages)


async def test_outcomes_whose_values_add_up_past_the_bound_go_in_several_statements(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each value within its bound, but a thousand jobs ending together with large results
    # would make one statement of a gigabyte.
    monkeypatch.setattr(outcomes_module, "MAX_STATEMENT_LENGTH", 2000)
    store = SlowWithLargeValues(most=2000)
    await store.insert_jobs(new_jobs(6))
    claims = await store.claim_batch("default", 6, "w", 30)
    large = '"' + "x" * 898 + '"'
    await write(store, *(outcome(c, JobStatus.SUCCEEDED, result=large) for c in claims))
    assert await results(store, claims) == [(JobStatus.SUCCEEDED, "x" * 898)] * 6
    assert store.statements == [[c.id for c in claims[i : i + 2]] for i in (0, 2, 4)]


async def test_outcomes_written_before_an_outage_are_not_sent_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(outcomes_module, "MAX_STATEMENT_LENGTH", 1000)

    class FailsOnce(MemoryStore):
        failed = False

        async def record_outcomes(self, outcomes: Sequence[Outcome]) -> set[int]:
            if len(self.calls) == 1 and not self.failed:
                self.failed = True
                raise DatabaseUnavailableError("connection reset by peer")
            self.calls.append([o.id for o in outcomes])
            return await super().record_outcomes(outcomes)

        calls: list[list[int]]

    store = FailsOnce()
    store.calls = []
    await store.insert_jobs(new_jobs(2))
    first, second = await store.claim_batch("default", 2, "w", 30)
    large = '"' + "x" * 900 + '"'
    await write(
        store,
        outcome(first, JobStatus.SUCCEEDED, result=large),
        outcome(second, JobStatus.SUCCEEDED, result=large),
    )
    assert store.calls == [[first.id], [second.id]]
    assert await results(store, [first, second]) == [(JobStatus.SUCCEEDED, "x" * 900)] * 2
    assert not [m for m in caplog.messages if "not recorded" in m]


class SlowWithManyRows(MemoryStore):
    """What PostgreSQL does with a statement that ends more than `most` jobs whose `errors` are
    long (each outcome rewrites it: 300 jobs with 100 traceback-sized entries took 1.3 s, 1,000
    took 6.8 s): runs past a short statement timeout, every time it is tried."""

    def __init__(self, most: int) -> None:
        super().__init__()
        self.most = most
        self.statements: list[int] = []

    async def record_outcomes(self, outcomes: Sequence[Outcome]) -> set[int]:
        self.statements.append(len(outcomes))
        if len(outcomes) > self.most:
            raise DatabaseTooSlowError("canceling statement due to statement timeout")
        return await super().record_outcomes(outcomes)


async def test_a_batch_too_slow_to_write_whole_is_written_in_smaller_statements() -> None:
    store = SlowWithManyRows(most=10)
    await store.insert_jobs(new_jobs(50, max_attempts=200))
    claims = await store.claim_batch("default", 50, "w", 30)
    # On the old code the 50 were sent together again and again, and none was ever written.
    await write(store, *(outcome(c, JobStatus.PENDING, error="boom", delay=60) for c in claims))
    assert [status for status, _ in await results(store, claims)] == [JobStatus.PENDING] * 50
    records = [await store.get_job(c.id) for c in claims]
    assert all(record is not None and record.errors for record in records)
    assert store.statements[:4] == [50, 25, 12, 6]
