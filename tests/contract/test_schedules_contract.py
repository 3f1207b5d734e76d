"""The Store contract for periodic jobs: declaring schedules, recording ticks exactly once with
their jobs, the overlap policies, the history and its pruning; on PostgreSQL and memory alike."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

from starlette_jobs import JobStatus, TickStatus
from starlette_jobs._schedule_records import (
    DeclaredSchedule,
    NewTick,
    ScheduleBusyError,
    TickRecord,
)
from starlette_jobs.store._protocol import Store
from tests.records import outcome

T0 = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)


def declared(name: str = "nightly", cron: str = "0 3 * * *") -> DeclaredSchedule:
    definition = json.dumps({"cron": cron, "job": "tests.nightly"}, sort_keys=True)
    return DeclaredSchedule(name, definition, f"hash of {definition}")


def tick(
    schedule: DeclaredSchedule,
    at: datetime = T0,
    *,
    overlap: str = "allow",
    skipped: str | None = None,
    note: str | None = None,
    worker_id: str = "worker-a",
) -> NewTick:
    return NewTick(
        schedule=schedule.name,
        definition_hash=schedule.definition_hash,
        at=at,
        overlap=overlap,
        skipped=skipped,
        note=note,
        job_name="tests.nightly",
        queue="nightly",
        payload='{"report": "sales"}',
        priority=3,
        max_attempts=2,
        worker_id=worker_id,
    )


async def finish(store: Store, job_id: int | None) -> None:
    claims = await store.claim_batch("nightly", 10, "worker-a", 30)
    assert job_id in [claim.id for claim in claims]
    await store.record_outcomes([outcome(claim, JobStatus.SUCCEEDED) for claim in claims])


# -- declaring -----------------------------------------------------------------------------------


async def test_declared_schedules_read_back_by_name(store: Store) -> None:
    await store.declare_schedules([declared("weekly", "0 9 * * MON"), declared()])
    stored = await store.list_schedules()
    assert [s.name for s in stored] == ["nightly", "weekly"]
    assert stored[0].definition == {"cron": "0 3 * * *", "job": "tests.nightly"}
    assert stored[0].definition_hash == declared().definition_hash
    assert (stored[0].last_tick_at, stored[0].last_tick, stored[0].waiting_tick_at) == (
        None,
        None,
        None,
    )


async def test_declaring_the_same_definition_again_keeps_it_and_its_ticks(store: Store) -> None:
    schedule = declared()
    await store.declare_schedules([schedule])
    (before,) = await store.list_schedules()
    assert await store.record_tick(tick(schedule)) is not None
    await store.declare_schedules([schedule])
    (after,) = await store.list_schedules()
    assert after.defined_at == before.defined_at
    assert after.last_tick_at == T0
    assert after.last_tick is not None
    assert after.last_tick.at == T0


async def test_a_changed_definition_starts_afresh_and_the_old_one_ticks_no_more(
    store: Store,
) -> None:
    old = declared()
    await store.declare_schedules([old])
    (before,) = await store.list_schedules()
    new = declared(cron="0 4 * * *")
    await store.declare_schedules([new])
    (after,) = await store.list_schedules()
    assert after.definition_hash == new.definition_hash
    assert after.defined_at >= before.defined_at
    # A worker still running the old code cannot record a tick any more.
    assert await store.record_tick(tick(old)) is None
    assert await store.schedule_ticks(old.name, 10) == []
    assert await store.list_jobs(None, "nightly", 10) == []
    assert await store.record_tick(tick(new)) is not None


async def test_a_schedule_the_code_no_longer_declares_is_deleted_with_its_ticks(
    store: Store,
) -> None:
    kept, removed = declared("kept"), declared("removed")
    await store.declare_schedules([kept, removed])
    assert await store.record_tick(tick(removed)) is not None
    await store.declare_schedules([kept])
    assert [s.name for s in await store.list_schedules()] == ["kept"]
    assert await store.schedule_ticks("removed", 10) == []
    assert await store.record_tick(tick(removed, T0 + timedelta(days=1))) is None
    await store.declare_schedules([])
    assert await store.list_schedules() == []


# -- ticks ---------------------------------------------------------------------------------------


async def test_a_tick_enqueues_its_job_scheduled_for_the_tick(store: Store) -> None:
    schedule = declared()
    await store.declare_schedules([schedule])
    recorded = await store.record_tick(tick(schedule, note="caught up"))
    assert recorded is not None
    assert (recorded.schedule, recorded.at, recorded.status, recorded.reason) == (
        "nightly",
        T0,
        TickStatus.ENQUEUED,
        "caught up",
    )
    assert recorded.worker_id == "worker-a"
    assert recorded.job_id is not None
    job = await store.get_job(recorded.job_id)
    assert job is not None
    assert (job.name, job.queue, job.arguments, job.priority, job.max_attempts) == (
        "tests.nightly",
        "nightly",
        {"report": "sales"},
        3,
        2,
    )
    assert (job.status, job.scheduled_for) == (JobStatus.PENDING, T0)
    (claim,) = await store.claim_batch("nightly", 10, "worker-a", 30)
    assert (claim.id, claim.scheduled_for) == (recorded.job_id, T0)
    (stored,) = await store.list_schedules()
    assert stored.last_tick_at == T0
    assert stored.last_tick == recorded


async def test_a_tick_is_recorded_once_however_many_workers_record_it(store: Store) -> None:
    """Workers that find the schedule's row locked by the one recording it are told so
    (`ScheduleBusyError`, PostgreSQL only) rather than wait; looking again, they find it
    recorded."""
    schedule = declared()
    await store.declare_schedules([schedule])
    results = await asyncio.gather(
        *(store.record_tick(tick(schedule, worker_id=f"worker-{i}")) for i in range(6)),
        return_exceptions=True,
    )
    recorded = [result for result in results if isinstance(result, TickRecord)]
    busy = [result for result in results if isinstance(result, ScheduleBusyError)]
    assert len(recorded) == 1
    assert len(recorded) + len(busy) + results.count(None) == 6
    assert await store.record_tick(tick(schedule, worker_id="worker-again")) is None
    assert len(await store.list_jobs(None, "nightly", 10)) == 1
    assert await store.schedule_ticks("nightly", 10) == recorded


async def test_a_tick_whose_record_was_pruned_is_not_recorded_again(store: Store) -> None:
    """A worker frozen for more than the history kept (the latest 100 ticks) records a tick
    that another recorded, enqueued, and then pruned: no record says it was, and the tick was
    recorded, and its job enqueued, a second time. A tick at or before the schedule's latest is
    decided already, recorded or not."""
    schedule = declared(cron="* * * * * *")
    await store.declare_schedules([schedule])
    first = await store.record_tick(tick(schedule))
    assert first is not None
    for second in range(1, 4):
        await store.record_tick(tick(schedule, T0 + timedelta(seconds=second)))
    assert await store.prune_ticks(2) == 2
    assert await store.record_tick(tick(schedule, worker_id="frozen")) is None
    assert await store.record_tick(tick(schedule, T0 + timedelta(seconds=1))) is None
    jobs = await store.list_jobs(None, "nightly", 10)
    assert sorted(job.scheduled_for or T0 for job in jobs) == [
        T0 + timedelta(seconds=second) for second in range(4)
    ]


async def test_a_skipped_tick_is_recorded_with_its_reason_and_no_job(store: Store) -> None:
    schedule = declared()
    await store.declare_schedules([schedule])
    recorded = await store.record_tick(tick(schedule, skipped="missed while no worker ran"))
    assert recorded is not None
    assert (recorded.status, recorded.reason, recorded.job_id) == (
        TickStatus.SKIPPED,
        "missed while no worker ran",
        None,
    )
    assert await store.list_jobs(None, "nightly", 10) == []
    assert (await store.list_schedules())[0].last_tick_at == T0


async def test_overlap_allow_enqueues_while_the_previous_job_runs(store: Store) -> None:
    schedule = declared()
    await store.declare_schedules([schedule])
    first = await store.record_tick(tick(schedule))
    second = await store.record_tick(tick(schedule, T0 + timedelta(days=1)))
    assert first is not None
    assert second is not None
    assert second.status is TickStatus.ENQUEUED
    assert len(await store.list_jobs(JobStatus.PENDING, "nightly", 10)) == 2


async def test_overlap_skip_skips_while_the_previous_job_is_pending_or_running(
    store: Store,
) -> None:
    schedule = declared()
    await store.declare_schedules([schedule])
    day = timedelta(days=1)
    first = await store.record_tick(tick(schedule, overlap="skip"))
    assert first is not None
    pending = await store.record_tick(tick(schedule, T0 + day, overlap="skip"))
    assert pending is not None
    assert (pending.status, pending.job_id) == (TickStatus.SKIPPED, None)
    assert pending.reason == f"overlap: job {first.job_id} of an earlier tick is still pending"
    claims = await store.claim_batch("nightly", 10, "worker-a", 30)
    running = await store.record_tick(tick(schedule, T0 + 2 * day, overlap="skip"))
    assert running is not None
    assert running.reason == f"overlap: job {first.job_id} of an earlier tick is still running"
    await store.record_outcomes([outcome(claims[0], JobStatus.SUCCEEDED)])
    after = await store.record_tick(tick(schedule, T0 + 3 * day, overlap="skip"))
    assert after is not None
    assert after.status is TickStatus.ENQUEUED


async def test_overlap_one_waiting_lets_one_tick_wait_for_the_running_job(store: Store) -> None:
    schedule = declared()
    await store.declare_schedules([schedule])
    day = timedelta(days=1)
    first = await store.record_tick(tick(schedule, overlap="one_waiting"))
    assert first is not None
    waiting = await store.record_tick(tick(schedule, T0 + day, overlap="one_waiting"))
    assert waiting is not None
    assert (waiting.status, waiting.job_id) == (TickStatus.WAITING, None)
    beyond = await store.record_tick(tick(schedule, T0 + 2 * day, overlap="one_waiting"))
    assert beyond is not None
    assert beyond.status is TickStatus.SKIPPED
    assert beyond.reason == f"overlap: a tick waits already, behind job {first.job_id}"
    (stored,) = await store.list_schedules()
    assert (stored.waiting_tick_at, stored.last_tick_at) == (T0 + day, T0 + 2 * day)
    # Not while the first tick's job is live.
    assert await store.start_waiting_tick(tick(schedule)) is None
    await finish(store, first.job_id)
    started = await store.start_waiting_tick(tick(schedule))
    assert started is not None
    assert (started.at, started.status) == (T0 + day, TickStatus.ENQUEUED)
    assert started.job_id is not None
    job = await store.get_job(started.job_id)
    assert job is not None
    assert job.scheduled_for == T0 + day
    assert await store.start_waiting_tick(tick(schedule)) is None  # started once
    (stored,) = await store.list_schedules()
    assert stored.waiting_tick_at is None
    # The started tick's job is now the one a new tick waits behind.
    again = await store.record_tick(tick(schedule, T0 + 3 * day, overlap="one_waiting"))
    assert again is not None
    assert again.status is TickStatus.WAITING


async def test_a_changed_definition_skips_the_tick_that_waited(store: Store) -> None:
    schedule = declared()
    await store.declare_schedules([schedule])
    await store.record_tick(tick(schedule, overlap="one_waiting"))
    waiting = await store.record_tick(tick(schedule, T0 + timedelta(1), overlap="one_waiting"))
    assert waiting is not None
    assert waiting.status is TickStatus.WAITING
    changed = declared(cron="0 4 * * *")
    await store.declare_schedules([changed])
    latest = (await store.schedule_ticks("nightly", 1))[0]
    assert (latest.status, latest.reason) == (
        TickStatus.SKIPPED,
        "the schedule changed while this tick waited",
    )
    assert (await store.list_schedules())[0].waiting_tick_at is None


# -- history -------------------------------------------------------------------------------------


async def test_the_history_lists_the_latest_ticks_first_and_keeps_the_latest(
    store: Store,
) -> None:
    one, two = declared("one"), declared("two")
    await store.declare_schedules([one, two])
    for hour in range(5):
        await store.record_tick(tick(one, T0 + timedelta(hours=hour), skipped="test"))
    await store.record_tick(tick(two, skipped="test"))
    assert [t.at for t in await store.schedule_ticks("one", 3)] == [
        T0 + timedelta(hours=hour) for hour in (4, 3, 2)
    ]
    assert await store.prune_ticks(2) == 3
    assert [t.at for t in await store.schedule_ticks("one", 10)] == [
        T0 + timedelta(hours=4),
        T0 + timedelta(hours=3),
    ]
    assert len(await store.schedule_ticks("two", 10)) == 1
    assert await store.prune_ticks(2) == 0


async def test_pruning_keeps_a_waiting_tick(store: Store) -> None:
    schedule = declared()
    await store.declare_schedules([schedule])
    await store.record_tick(tick(schedule, overlap="one_waiting"))
    await store.record_tick(tick(schedule, T0 + timedelta(hours=1), overlap="one_waiting"))
    for hour in range(2, 5):
        await store.record_tick(tick(schedule, T0 + timedelta(hours=hour), overlap="one_waiting"))
    await store.prune_ticks(1)
    statuses = [t.status for t in await store.schedule_ticks("nightly", 10)]
    assert statuses == [TickStatus.SKIPPED, TickStatus.WAITING]


async def test_overlap_one_waiting_skips_a_later_tick_while_one_waits_even_if_the_job_ended(
    store: Store,
) -> None:
    """The job the waiting tick waits for has ended, but the waiting tick is not started yet
    (the next tick came first): the waiting tick keeps its turn, the later one is skipped."""
    schedule = declared()
    await store.declare_schedules([schedule])
    day = timedelta(days=1)
    first = await store.record_tick(tick(schedule, overlap="one_waiting"))
    assert first is not None
    await store.record_tick(tick(schedule, T0 + day, overlap="one_waiting"))
    await finish(store, first.job_id)
    later = await store.record_tick(tick(schedule, T0 + 2 * day, overlap="one_waiting"))
    assert later is not None
    assert (later.status, later.job_id) == (TickStatus.SKIPPED, None)
    started = await store.start_waiting_tick(tick(schedule))
    assert started is not None
    assert (started.at, started.status) == (T0 + day, TickStatus.ENQUEUED)


async def test_a_tick_not_due_yet_by_the_stores_clock_is_not_recorded(store: Store) -> None:
    """A worker whose clock runs ten minutes fast must not enqueue the next ten minutes' ticks
    now, nor move the schedule past them: the store's clock says when a tick is due."""
    schedule = declared()
    await store.declare_schedules([schedule])
    early = datetime.now(UTC) + timedelta(minutes=10)
    assert await store.record_tick(tick(schedule, early)) is None
    assert await store.schedule_ticks(schedule.name, 10) == []
    (stored,) = await store.list_schedules()
    assert stored.last_tick_at is None
    assert await store.list_jobs(None, "nightly", 10) == []
