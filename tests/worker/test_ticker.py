"""`worker/_ticker.py`: a worker's rounds over its schedules, with a clock the test moves: what
each round records, how long it sleeps, a restart across ticks under each catch-up policy,
several workers, and definitions changed or removed by newer code. On the memory store (the
contract suite holds PostgreSQL to the same store semantics)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from starlette_jobs import DatabaseUnavailableError, JobStatus, TickStatus, job, periodic
from starlette_jobs._cron import Cron
from starlette_jobs._metrics import Metrics
from starlette_jobs._schedule_records import NewTick, ScheduleBusyError, StoredSchedule, TickRecord
from starlette_jobs._schedules import CatchUp, Overlap, Schedule
from starlette_jobs._worker_records import NewWorker
from starlette_jobs.memory import _schedules as memory_schedules
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.worker import _ticker
from starlette_jobs.worker._ticker import MAX_SLEEP, ON_TIME_SLACK, Ticker
from tests.conftest import eventually
from tests.records import outcome
from tests.test_metrics import points

T0 = datetime(2026, 5, 1, 12, 0, 0, 500000, tzinfo=UTC)


@job(name="tests.ticker.beat", queue="ticker")
async def beat() -> None:
    pass


class Clock:
    """The test's clock, the tickers' and the memory store's alike (it writes when a schedule
    is defined)."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(memory_schedules, "utc_now", clock)
    return clock


def schedule(
    cron: str = "* * * * *",
    *,
    name: str = "beat",
    catch_up: CatchUp = "latest",
    overlap: Overlap = "allow",
) -> Schedule:
    return Schedule(name, beat, Cron(cron, "UTC"), "{}", catch_up, overlap)


def ticker(
    store: MemoryStore, clock: Clock, schedules: Sequence[Schedule], worker: str = "w1"
) -> Ticker:
    return Ticker(store, schedules, worker, clock)


async def ticks(store: MemoryStore, name: str = "beat") -> list[tuple[str, TickStatus]]:
    found = await store.schedule_ticks(name, 1000)
    return [(t.at.strftime("%H:%M:%S"), t.status) for t in reversed(found)]


async def enqueued(store: MemoryStore) -> list[str]:
    jobs = await store.list_jobs(None, "ticker", 1000)
    return sorted(j.scheduled_for.strftime("%H:%M:%S") for j in jobs if j.scheduled_for)


async def test_a_round_records_the_ticks_due_and_sleeps_until_the_next(clock: Clock) -> None:
    store = MemoryStore()
    worker = ticker(store, clock, [schedule()])
    wait = await worker.round()  # declares; the schedule is defined now: nothing due yet
    assert [s.name for s in await store.list_schedules()] == ["beat"]
    assert await ticks(store) == []
    assert wait == pytest.approx(59.5 + 0.005)
    clock.advance(59.5)
    wait = await worker.round()
    assert await ticks(store) == [("12:01:00", TickStatus.ENQUEUED)]
    assert await enqueued(store) == ["12:01:00"]
    assert wait == MAX_SLEEP  # 12:02 is 60.005 s away
    assert await worker.round() == MAX_SLEEP  # nothing new: nothing recorded
    assert len(await enqueued(store)) == 1


async def test_the_sleep_is_bounded_and_the_earliest_schedule_wakes_it(clock: Clock) -> None:
    store = MemoryStore()
    hourly, every_ten = schedule("0 * * * *", name="hourly"), schedule("*/10 * * * * *")
    worker = ticker(store, clock, [hourly, every_ten])
    assert await worker.round() == pytest.approx(9.5 + 0.005)
    only_hourly = ticker(MemoryStore(), clock, [hourly])
    assert await only_hourly.round() == MAX_SLEEP


async def test_several_workers_record_each_tick_once(clock: Clock) -> None:
    store = MemoryStore()
    workers = [ticker(store, clock, [schedule("* * * * * *")], f"w{i}") for i in range(3)]
    for _ in range(10):
        for worker in workers:
            await worker.round()
        clock.advance(1)
    recorded = await ticks(store)
    assert len(recorded) == 9
    assert len({at for at, _ in recorded}) == 9
    assert await enqueued(store) == [at for at, _ in recorded]
    assert {t.worker_id for t in await store.schedule_ticks("beat", 100)} == {"w0"}


async def restarted(clock: Clock, catch_up: CatchUp) -> tuple[MemoryStore, list[str]]:
    """A worker ticks every minute from 12:00 to 12:02, all stop, and one starts at 12:10:30."""
    store = MemoryStore()
    clock.now = T0 - timedelta(minutes=1)
    first = ticker(store, clock, [schedule(catch_up=catch_up)])
    for _ in range(4):
        await first.round()
        clock.advance(60)
    assert await enqueued(store) == ["12:00:00", "12:01:00", "12:02:00"]
    clock.now = T0 + timedelta(minutes=10, seconds=30)
    second = ticker(store, clock, [schedule(catch_up=catch_up)], "w2")
    await second.round()
    return store, (await enqueued(store))[3:]


async def test_a_restart_with_catch_up_latest_runs_the_latest_missed_tick_once(
    clock: Clock,
) -> None:
    store, after = await restarted(clock, "latest")
    assert after == ["12:10:00"]
    (latest,) = await store.schedule_ticks("beat", 1)
    assert latest.reason == "caught up: the latest of the ticks missed while no worker ran"


async def test_a_restart_with_catch_up_none_runs_nothing_and_says_so(clock: Clock) -> None:
    store, after = await restarted(clock, "none")
    assert after == []
    (latest,) = await store.schedule_ticks("beat", 1)
    assert (latest.at.strftime("%H:%M"), latest.status) == ("12:10", TickStatus.SKIPPED)
    assert latest.reason == "missed while no worker ran (catch_up='none')"


async def test_a_restart_with_a_window_runs_each_missed_tick_within_it(clock: Clock) -> None:
    _, after = await restarted(clock, timedelta(minutes=4))
    assert after == ["12:07:00", "12:08:00", "12:09:00", "12:10:00"]


async def test_a_backlog_longer_than_a_round_is_caught_up_in_rounds_one_after_another(
    clock: Clock,
) -> None:
    """Two days missed of a schedule that runs every minute, all caught up (2,880 ticks): the
    rounds follow each other at once while they come back full, not a minute apart (which
    took three minutes here, and a week's backlog ten)."""
    store = MemoryStore()
    clock.now = T0 - timedelta(minutes=1)
    caught_up = schedule(catch_up=timedelta(days=2))
    await ticker(store, clock, [caught_up]).round()
    clock.advance(2 * 86400)
    restarted = ticker(store, clock, [caught_up], "w2")
    waits = [await restarted.round() for _ in range(3)]
    assert waits[:2] == [0.0, 0.0]
    assert waits[2] == pytest.approx(59.5 + 0.005)
    assert len(await store.list_jobs(None, "ticker", 5000)) == 2 * 1440


async def run_until_ticked(fast: Ticker, store: MemoryStore, clock: Clock, count: int) -> None:
    """From a minute before T0, rounds of `fast`, each after the sleep the last asked for,
    until `count` ticks are recorded (at most 200 rounds)."""
    clock.now = T0 - timedelta(minutes=1)
    wait = await fast.round()
    for _ in range(200):
        assert wait is not None
        clock.advance(wait)
        wait = await fast.round()
        if len(await ticks(store)) >= count:
            return


async def test_a_worker_whose_clock_runs_fast_records_a_tick_seconds_late_not_a_period(
    clock: Clock,
) -> None:
    """The worker's clock runs 5 s ahead of the store's. The store refuses a tick not due by
    its own clock (a second's slack); the ticker, taking the refusal for a tick another worker
    recorded, slept until the next one, and recorded this one a whole period late."""
    store = MemoryStore()
    fast = Ticker(store, [schedule()], "w1", lambda: clock.now + timedelta(seconds=5))
    await run_until_ticked(fast, store, clock, 1)
    (tick,) = await store.schedule_ticks("beat", 10)
    assert tick.at.strftime("%H:%M:%S") == "12:00:00"
    assert tick.recorded_at - tick.at < timedelta(seconds=5), tick.recorded_at


@pytest.mark.parametrize("skew", [3, 30])
async def test_a_worker_whose_clock_runs_fast_enqueues_a_catch_up_none_tick_all_the_same(
    clock: Clock, skew: float
) -> None:
    """The store refused each look at the tick as early (not due by its clock) until the tick
    was more than ON_TIME_SLACK behind the worker's clock; then the ticker took it for missed,
    and `catch_up="none"` skipped it: every tick, for as long as the clocks disagree."""
    store = MemoryStore()
    fast = Ticker(
        store, [schedule(catch_up="none")], "w1", lambda: clock.now + timedelta(seconds=skew)
    )
    await run_until_ticked(fast, store, clock, 2)
    assert await ticks(store) == [
        ("12:00:00", TickStatus.ENQUEUED),
        ("12:01:00", TickStatus.ENQUEUED),
    ]


async def test_a_tick_due_just_before_a_worker_starts_is_on_time(clock: Clock) -> None:
    store = MemoryStore()
    clock.now = T0 - timedelta(minutes=1)
    first = ticker(store, clock, [schedule(catch_up="none")])
    await first.round()
    clock.now = T0.replace(microsecond=0) + ON_TIME_SLACK / 2  # the 12:00 tick is not recorded
    second = ticker(store, clock, [schedule(catch_up="none")], "w2")
    await second.round()
    assert await ticks(store) == [("12:00:00", TickStatus.ENQUEUED)]


async def test_a_changed_definition_stops_the_old_code_ticking(clock: Clock) -> None:
    store = MemoryStore()
    old = ticker(store, clock, [schedule("* * * * *")], "old")
    await old.round()
    new = ticker(store, clock, [schedule("*/2 * * * *")], "new")  # a deploy changes it
    await new.round()
    for _ in range(4):
        clock.advance(60)
        await old.round()
        await new.round()
    recorded = await store.schedule_ticks("beat", 100)
    assert {t.worker_id for t in recorded} == {"new"}
    assert sorted(t.at.minute for t in recorded) == [2, 4]


async def test_a_removed_schedule_stops_ticking_once_newer_code_starts(clock: Clock) -> None:
    store = MemoryStore()
    old = ticker(store, clock, [schedule("* * * * *"), schedule(name="other")], "old")
    await old.round()
    new = ticker(store, clock, [schedule(name="other")], "new")
    await new.round()
    clock.advance(120)
    await old.round()
    assert [s.name for s in await store.list_schedules()] == ["other"]
    assert await store.schedule_ticks("beat", 10) == []
    assert len(await store.schedule_ticks("other", 10)) == 2


async def register(store: MemoryStore, worker_id: str, schedules: Sequence[Schedule] = ()) -> None:
    """`worker_id` in the registry, its code declaring `schedules`."""
    declared = tuple((s.name, s.declared().definition_hash) for s in schedules)
    await store.register_worker(
        NewWorker(worker_id, "host", 1, ("ticker",), (beat.name,), "1", 1.0, declared)
    )


def stored_crons(schedules: Sequence[StoredSchedule]) -> list[tuple[str, str]]:
    return [(s.name, s.definition["cron"]) for s in schedules]


NEW_CODE = [schedule("*/2 * * * *"), schedule("0 * * * *", name="report")]
OLD_CODE = [schedule("* * * * *")]


async def test_an_old_worker_restarted_mid_deploy_wins_while_it_lives_then_new_code_does(
    clock: Clock,
) -> None:
    """A rolling deploy: a new worker runs "beat" every two minutes and a new "report"; an old
    one (every minute, no "report") restarts after it, its start declaring its code's set: it
    ticks, the new one stands by. Once the old one has gone, the new one declares its own again
    and ticks them: it does not wait for a restart of its own. A worker whose code declares no
    schedule, started meanwhile, has no say."""
    store = MemoryStore()
    new = ticker(store, clock, NEW_CODE, "w-new")
    await register(store, "w-new", NEW_CODE)
    await new.round()
    old = ticker(store, clock, OLD_CODE, "w-old")
    await register(store, "w-old", OLD_CODE)
    await old.round()  # 12:00:00.5: the old set, "report" deleted
    assert stored_crons(await store.list_schedules()) == [("beat", "* * * * *")]
    await register(store, "w-plain")  # another queue's worker: no schedule
    for _ in range(3):
        clock.advance(60)
        await new.round()  # the old worker's code holds what is stored: the new one waits
        await old.round()
    assert {t.worker_id for t in await store.schedule_ticks("beat", 100)} == {"w-old"}
    assert [s.name for s in await store.list_schedules()] == ["beat"]
    await store.unregister_worker("w-old")  # stopped, or found dead by the others
    clock.advance(60)  # 12:04:00.5
    await new.round()
    assert stored_crons(await store.list_schedules()) == [
        ("beat", "*/2 * * * *"),
        ("report", "0 * * * *"),
    ]
    clock.advance(120)
    await new.round()
    latest = await store.schedule_ticks("beat", 9)
    assert [(t.at.strftime("%H:%M"), t.worker_id) for t in latest] == [
        ("12:06", "w-new"), ("12:03", "w-old"), ("12:02", "w-old"), ("12:01", "w-old"),
    ]  # fmt: skip


async def test_a_worker_registered_again_does_not_take_back_what_newer_code_declared(
    clock: Clock,
) -> None:
    """The old worker's registry row is deleted while it is frozen (found dead), the new one
    declares its code's schedules again, and the old one, awake, registers again: it stands
    by, whenever it registered, while the new worker's code holds what is stored."""
    store = MemoryStore()
    new, old = ticker(store, clock, NEW_CODE, "w-new"), ticker(store, clock, OLD_CODE, "w-old")
    await register(store, "w-new", NEW_CODE)
    await new.round()
    await register(store, "w-old", OLD_CODE)
    await old.round()
    await store.unregister_worker("w-old")
    clock.advance(60)
    await new.round()
    await register(store, "w-old", OLD_CODE)
    for _ in range(3):
        clock.advance(60)
        await old.round()
        await new.round()
    assert stored_crons(await store.list_schedules()) == [
        ("beat", "*/2 * * * *"),
        ("report", "0 * * * *"),
    ]
    assert {t.worker_id for t in await store.schedule_ticks("beat", 100)} == {"w-new"}


async def test_a_process_declaring_no_schedule_leaves_them_be(clock: Clock) -> None:
    # A script that drains a queue, importing no module with a schedule, must not delete the
    # fleet's schedules: the workers that declare them declared them once, at their start.
    store = MemoryStore()
    await ticker(store, clock, [schedule()]).round()
    assert await ticker(store, clock, []).round() is None
    assert [s.name for s in await store.list_schedules()] == ["beat"]


async def test_a_process_declaring_other_schedules_removes_the_rest(clock: Clock) -> None:
    store = MemoryStore()
    await ticker(store, clock, [schedule()]).round()
    await ticker(store, clock, [schedule(name="other")]).round()
    assert [s.name for s in await store.list_schedules()] == ["other"]


def declare_late(name: str) -> None:
    """A `@periodic` declared in this process after its ticker started (a module imported
    late); the test's fixture forgets it afterwards."""
    periodic("* * * * *", name=name)(beat)


async def test_a_schedule_declared_after_the_start_is_declared_and_ticks(clock: Clock) -> None:
    store = MemoryStore()
    worker = ticker(store, clock, [schedule()])
    await worker.round()
    declare_late("late")
    clock.advance(10)
    await worker.round()  # declared now: its first tick is the next one due
    assert [s.name for s in await store.list_schedules()] == ["beat", "late"]
    clock.advance(49.5)
    await worker.round()
    assert await ticks(store, "late") == [("12:01:00", TickStatus.ENQUEUED)]
    assert await ticks(store) == [("12:01:00", TickStatus.ENQUEUED)]


async def test_a_process_that_declared_none_at_its_start_ticks_one_declared_later(
    clock: Clock,
) -> None:
    store = MemoryStore()
    await ticker(store, clock, [schedule(name="theirs")], "w2").round()
    worker = ticker(store, clock, [])
    assert await worker.round() is None
    declare_late("late")
    clock.advance(30)
    assert await worker.round() == pytest.approx(29.5 + 0.005)  # until 12:01, its first tick
    clock.advance(29.5)
    await worker.round()
    assert await ticks(store, "late") == [("12:01:00", TickStatus.ENQUEUED)]
    # Declared late, it adds to the fleet's schedules: another worker's are left be.
    assert [s.name for s in await store.list_schedules()] == ["late", "theirs"]


async def test_a_late_declaration_leaves_the_schedules_of_newer_code_be(clock: Clock) -> None:
    """An older worker that imports a module late must not delete what newer code declared
    (its start did; a late declaration only adds)."""
    store = MemoryStore()
    older = ticker(store, clock, [schedule()], "old")
    await older.round()
    await ticker(store, clock, [schedule(), schedule(name="newer")], "new").round()
    defined = {s.name: s.defined_at for s in await store.list_schedules()}
    declare_late("late")
    clock.advance(1)
    await older.round()
    stored = await store.list_schedules()
    assert [s.name for s in stored] == ["beat", "late", "newer"]
    assert {s.name: s.defined_at for s in stored if s.name != "late"} == defined


async def test_a_sleeping_ticker_wakes_for_a_schedule_declared_meanwhile(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_ticker, "DECLARATIONS_RECHECK", 0.01)
    store = MemoryStore()
    worker = ticker(store, clock, [])
    worker.start()
    try:
        await asyncio.sleep(0)  # a yield: its first round finds nothing to tick, and it waits
        assert not await declared(store, "late")
        declare_late("late")
        await eventually(lambda: declared(store, "late"), "the late schedule declared")
    finally:
        await worker.stop()


async def declared(store: MemoryStore, name: str) -> bool:
    return name in {s.name for s in await store.list_schedules()}


async def test_overlap_one_waiting_starts_the_waiting_tick_once_the_job_ends(clock: Clock) -> None:
    store = MemoryStore()
    worker = ticker(store, clock, [schedule(overlap="one_waiting")])
    await worker.round()
    clock.advance(59.5)
    await worker.round()  # 12:01 enqueued
    (claim,) = await store.claim_batch("ticker", 10, "w1", 30)
    clock.advance(120)
    wait = await worker.round()  # 12:02 waits, 12:03 skipped
    assert await ticks(store) == [
        ("12:01:00", TickStatus.ENQUEUED),
        ("12:02:00", TickStatus.WAITING),
        ("12:03:00", TickStatus.SKIPPED),
    ]
    assert wait == 1.0  # looks again soon: the job it waits for may end any time
    await store.record_outcomes([outcome(claim, JobStatus.SUCCEEDED)])
    await worker.round()
    assert await ticks(store) == [
        ("12:01:00", TickStatus.ENQUEUED),
        ("12:02:00", TickStatus.ENQUEUED),
        ("12:03:00", TickStatus.SKIPPED),
    ]
    assert await enqueued(store) == ["12:01:00", "12:02:00"]


async def test_a_round_the_database_fails_is_tried_again(
    clock: Clock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_ticker, "RETRY_AFTER", 0.01)
    store = MemoryStore()
    failures = [DatabaseUnavailableError("connection refused")] * 2
    listed = store.list_schedules

    async def list_schedules() -> list[StoredSchedule]:
        if failures:
            raise failures.pop()
        return await listed()

    await ticker(store, clock, [schedule()]).round()
    clock.advance(60)
    monkeypatch.setattr(store, "list_schedules", list_schedules)
    worker = ticker(store, clock, [schedule()])
    worker.start()
    try:
        await eventually(lambda: has_ticks(store), "the tick recorded after the failures")
    finally:
        await worker.stop()
    assert "ticking the schedules failed, retrying: connection refused" in caplog.text


async def has_ticks(store: MemoryStore) -> bool:
    return bool(await store.schedule_ticks("beat", 1))


async def test_overlap_one_waiting_never_enqueues_a_later_tick_ahead_of_the_waiting_one(
    clock: Clock,
) -> None:
    """The job a tick waits for ends less than a second before the next tick (or while no
    worker looked): the waiting tick goes first, the later one does not jump ahead of it."""
    store = MemoryStore()
    worker = ticker(store, clock, [schedule(overlap="one_waiting")])
    await worker.round()
    clock.advance(59.5)
    await worker.round()  # 12:01 enqueued
    (claim,) = await store.claim_batch("ticker", 10, "w1", 30)
    clock.advance(60)
    await worker.round()  # 12:02 waits
    await store.record_outcomes([outcome(claim, JobStatus.SUCCEEDED)])
    clock.advance(60)
    await worker.round()  # 12:03 is due, and 12:02's wait is over
    assert await enqueued(store) == ["12:01:00", "12:02:00"]
    assert ("12:02:00", TickStatus.ENQUEUED) in await ticks(store)


async def test_a_window_wider_than_a_rounds_ticks_catches_up_every_missed_tick_in_it(
    clock: Clock,
) -> None:
    """Half an hour of a tick every second missed (1,800: more than one round records): every
    one of them is enqueued, over several rounds, none lost between the rounds."""
    store = MemoryStore()
    every_second = schedule("* * * * * *", catch_up=timedelta(minutes=30))
    await ticker(store, clock, [every_second]).round()  # 12:00:00.5: nothing due yet
    clock.advance(30 * 60)  # every worker stopped meanwhile
    restarted = ticker(store, clock, [every_second], "w2")
    for _ in range(5):
        await restarted.round()
    jobs = await store.list_jobs(None, "ticker", 10_000)
    missed = {T0.replace(microsecond=0) + timedelta(seconds=n) for n in range(1, 1801)}
    assert missed <= {j.scheduled_for for j in jobs}


async def test_a_worker_whose_clock_runs_ahead_enqueues_no_tick_before_it_is_due(
    clock: Clock,
) -> None:
    """One host's clock is ten minutes fast (the test's `clock` is the database's): its worker
    must not enqueue the ticks of the next ten minutes now, nor make the others skip them."""
    store = MemoryStore()
    on_time = ticker(store, clock, [schedule()])
    await on_time.round()  # 12:00:00.5
    fast = Clock(clock.now + timedelta(minutes=10))
    await ticker(store, fast, [schedule()], "w2").round()
    early = [j.scheduled_for for j in await store.list_jobs(None, "ticker", 100)]
    assert early == []
    for _ in range(3):
        clock.advance(60)
        fast.advance(60)
        await on_time.round()
    assert await enqueued(store) == ["12:01:00", "12:02:00", "12:03:00"]


async def test_ticks_missed_while_the_database_was_unreachable_follow_the_catch_up_policy(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/schedules.md: a tick is missed when no worker runs at its instant, "all stopped, or
    the database unreachable". A worker that ran through a ten-minute outage (its rounds
    failing every five seconds) does not enqueue the ten ticks it missed under
    catch_up="none"."""
    store = MemoryStore()
    worker = ticker(store, clock, [schedule(catch_up="none")])
    await worker.round()  # 12:00:00.5
    listed = store.list_schedules

    async def unreachable() -> list[StoredSchedule]:
        raise DatabaseUnavailableError("connection refused")

    monkeypatch.setattr(store, "list_schedules", unreachable)
    for _ in range(120):  # until 12:10:00.5, a round every five seconds (RETRY_AFTER), failing
        clock.advance(5)
        with pytest.raises(DatabaseUnavailableError):
            await worker.round()
    monkeypatch.setattr(store, "list_schedules", listed)
    clock.advance(5)  # 12:10:05.5: back
    await worker.round()
    # 12:10:00 was found due 5.5 s late: missed as well, the latest of them, skipped.
    assert await enqueued(store) == []
    assert ("12:10:00", TickStatus.SKIPPED) in await ticks(store)


async def test_ticks_due_while_a_round_hung_follow_the_catch_up_policy(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process stopped (or its event loop blocked) for 30 s inside a round, while it
    awaited the database, rather than in its sleep: the thirty ticks of a schedule that runs
    every second are found late by the next round, missed, and not all enqueued at once."""
    store = MemoryStore()
    every_second = schedule("* * * * * *", catch_up="none")
    worker = ticker(store, clock, [every_second])
    await worker.round()
    clock.advance(1)
    await worker.round()  # 12:00:01.5
    listed = store.list_schedules

    async def hung() -> list[StoredSchedule]:
        clock.advance(30)
        return await listed()

    monkeypatch.setattr(store, "list_schedules", hung)
    clock.advance(1)
    await worker.round()  # from 12:00:02.5, its reads answered at 12:00:32.5
    monkeypatch.setattr(store, "list_schedules", listed)
    clock.advance(0.005)
    await worker.round()
    assert await enqueued(store) == ["12:00:01", "12:00:02", "12:00:31", "12:00:32"]
    assert ("12:00:30", TickStatus.SKIPPED) in await ticks(store)


async def test_ticks_slept_through_by_a_frozen_worker_follow_the_catch_up_policy(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker stopped (SIGSTOP, a VM paused, an event loop blocked) for an hour ran at none
    of the hour's ticks: it wakes 60 minutes past the sleep its last round asked for, and
    the sixty ticks are missed, as if it had been down, not sixty jobs enqueued at once."""
    store = MemoryStore()
    clock.now = T0 - timedelta(minutes=1)
    worker = ticker(store, clock, [schedule(catch_up="latest")])
    await worker.round()
    clock.advance(60)
    await worker.round()  # 12:00:00.5
    assert await enqueued(store) == ["12:00:00"]
    clock.advance(3630)  # asked to sleep until 12:01:00.005; woke at 13:00:30.5
    with caplog.at_level(logging.WARNING, logger="starlette_jobs.worker"):
        await worker.round()
    assert await enqueued(store) == ["12:00:00", "13:00:00"]
    (latest,) = await store.schedule_ticks("beat", 1)
    assert latest.reason == "caught up: the latest of the ticks missed while no worker ran"
    assert "woke 3570 s past its planned wake-up" in caplog.text
    clock.advance(30 + 9)  # 9 s late, 13:01:09.5: an event loop running late, on time
    await worker.round()
    assert await enqueued(store) == ["12:00:00", "13:00:00", "13:01:00"]


async def test_ticks_are_counted_on_time_and_missed(clock: Clock) -> None:
    reader = InMemoryMetricReader()
    metrics = Metrics(MeterProvider(metric_readers=[reader]))
    store = MemoryStore()
    clock.now = T0 - timedelta(minutes=1)
    first = Ticker(store, [schedule(catch_up="none")], "w1", clock, metrics=metrics)
    for _ in range(4):
        await first.round()
        clock.advance(60)
    clock.now = T0 + timedelta(minutes=10, seconds=30)  # after 12:03 to 12:10 went unticked
    second = Ticker(store, [schedule(catch_up="none")], "w2", clock, metrics=metrics)
    await second.round()
    counted = {
        (a["starlette_jobs.tick.status"], a["starlette_jobs.tick.missed"]): p.value
        for a, p in points(reader)["starlette_jobs.schedule.ticks"]
        if a["starlette_jobs.schedule.name"] == "beat"
    }
    assert counted == {("enqueued", False): 3, ("skipped", True): 1}


class SlowTicks(MemoryStore):
    """Each tick recorded takes the clock 10 ms: a transaction of its own, as on PostgreSQL
    (about 9 ms a tick with three workers at it, in a review)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self._clock = clock

    async def record_tick(self, tick: NewTick) -> TickRecord | None:
        self._clock.advance(0.01)
        return await super().record_tick(tick)


async def test_a_backlog_of_one_schedule_leaves_anothers_ticks_on_time(clock: Clock) -> None:
    """After 55 minutes without a worker, a schedule caught up over an hour has 3,300 ticks to
    record, 1,000 a round: rounds of 10 s, during which every second's tick of another schedule
    was due "longer ago than the slack" at the next round, so taken for missed, and its
    `latest` policy kept one of ten. A round works on a backlog a second at most."""
    store = SlowTicks(clock)
    backlog = schedule("* * * * * *", name="backlog", catch_up=timedelta(hours=1))
    pulse = schedule("* * * * * *", name="pulse")
    clock.now = T0 - timedelta(minutes=1)
    await ticker(store, clock, [backlog, pulse]).round()
    clock.advance(55 * 60)  # no worker ran
    restarted = ticker(store, clock, [backlog, pulse], "w2")
    back = clock.now
    while clock.now < back + timedelta(seconds=45):  # the backlog takes 33 s to record
        clock.advance(await restarted.round() or 0.0)
    pulse_ticks = [t for t in await store.schedule_ticks("pulse", 1000) if t.at > back]
    assert [t for t in pulse_ticks if t.reason is not None] == []  # none taken for missed
    assert len(pulse_ticks) >= 44  # one a second
    backlog_ticks = await store.schedule_ticks("backlog", 5000)
    assert len(backlog_ticks) >= 55 * 60  # caught up all the same...
    assert max(t.at for t in backlog_ticks) >= clock.now - ON_TIME_SLACK  # ...and on time now


async def test_a_schedule_whose_row_is_locked_elsewhere_holds_up_no_other(
    clock: Clock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The store found one schedule's row locked by another transaction (an operator's session,
    a worker stopped mid-tick; on PostgreSQL, `lock_schedule` NOWAIT): the other schedule ticks
    on time, the round looks again in a second, a lock that lasts is warned of once, and the
    ticks it held back go by the catch-up policy, as in an outage."""
    store = MemoryStore()
    locked, free = (
        schedule("* * * * * *", name=name, catch_up="none") for name in ("a-locked", "b-free")
    )
    worker = ticker(store, clock, [locked, free])
    await worker.round()  # 12:00:00.5: declared
    record = store.record_tick

    async def busy_for_one(tick: NewTick) -> TickRecord | None:
        if tick.schedule == "a-locked":
            raise ScheduleBusyError(tick.schedule)
        return await record(tick)

    monkeypatch.setattr(store, "record_tick", busy_for_one)
    with caplog.at_level(logging.INFO, logger="starlette_jobs.worker"):
        for _ in range(12):  # until 12:00:12.5, a round a second
            clock.advance(1)
            wait = await worker.round()
            assert wait is not None
            assert wait <= _ticker.REFUSED_RECHECK
        monkeypatch.setattr(store, "record_tick", record)
        clock.advance(1)
        await worker.round()  # 12:00:13.5: the lock is gone
    assert [at for at, _ in await ticks(store, "b-free")] == [
        f"12:00:{second:02}" for second in range(1, 14)
    ]
    # Within ON_TIME_SLACK of 12:00:13.5, on time; the eleven before them, held back,
    # missed: catch_up="none" records the latest of them, skipped.
    assert await ticks(store, "a-locked") == [
        ("12:00:11", TickStatus.SKIPPED),
        ("12:00:12", TickStatus.ENQUEUED),
        ("12:00:13", TickStatus.ENQUEUED),
    ]
    warnings = [r.message for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "schedule 'a-locked': its row has been locked by another transaction for 10 s (an "
        "operator's session, or a worker stopped in the middle of a tick): its ticks wait, "
        "and those missed meanwhile go by its catch-up policy"
    ]
    assert "schedule 'a-locked': its row is no longer locked; ticking again" in caplog.messages


async def test_ticks_go_on_from_now_once_a_clock_that_ran_ahead_is_set_back(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """The clocks ran a day ahead, then were set right (an NTP step): the schedule's latest
    tick is a day ahead, and every tick before it used to be refused as decided already, for
    a day, silently. It ticks on from now, and the worker says why."""
    store = MemoryStore()
    worker = ticker(store, clock, [schedule("* * * * * *", catch_up="none")])
    await worker.round()  # declared at 12:00:00.5
    clock.advance(86_400)  # a day ahead
    for _ in range(2):
        clock.advance(1)
        await worker.round()
    ahead = {tick.at for tick in await store.schedule_ticks("beat", 100)}
    assert min(ahead) > T0 + timedelta(hours=23)
    clock.now = T0 + timedelta(seconds=10)  # set right: 12:00:10.5
    with caplog.at_level(logging.WARNING, logger="starlette_jobs.worker"):
        await worker.round()
        clock.advance(1)
        await worker.round()
    today = [t.at for t in await store.schedule_ticks("beat", 100) if t.at not in ahead]
    assert sorted(today) == [T0.replace(microsecond=0) + timedelta(seconds=s) for s in (9, 10, 11)]
    [warning] = [m for m in caplog.messages if m.startswith("schedule ")]
    assert warning.startswith("schedule 'beat': its latest tick (or definition) is at 2026-05-02")
    assert warning.endswith("the clocks ran ahead and were set back. Its ticks go on from now")


async def test_a_schedule_another_live_workers_code_removed_is_said_so_once(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker whose schedule a live worker of other code removed (a deploy in progress, or
    two versions meant to run side by side) stops ticking it, and says so once: it used to
    stand by in silence."""
    store = MemoryStore()
    ours, theirs = schedule(name="ours"), schedule(name="theirs")
    old = ticker(store, clock, [ours], worker="w-old")
    await register(store, "w-old", [ours])
    await old.round()
    await register(store, "w-new", [theirs])
    await ticker(store, clock, [theirs], worker="w-new").round()  # removes "ours"
    with caplog.at_level(logging.WARNING, logger="starlette_jobs.worker"):
        for _ in range(3):
            clock.advance(60)
            await old.round()
    assert await ticks(store, "ours") == []
    [warning] = caplog.messages
    assert warning.startswith(
        "schedule 'ours' is removed in the database by the code of another live worker"
    )


async def test_races_lost_now_and_then_to_another_worker_are_no_lock_to_warn_of(
    clock: Clock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Another worker records each tick while this one asks for the row (NOWAIT: busy); a
    second later this one finds the tick recorded, and asks for nothing. The third race lost,
    10 s on, was warned of as a row locked for 10 s by an operator or a stopped worker: the
    time was counted from the first race, never reset by the rounds that found no lock."""
    store = MemoryStore()
    worker = ticker(store, clock, [schedule("*/5 * * * * *", catch_up="none")])
    await worker.round()  # 12:00:00.5: declared
    record = store.record_tick

    async def another_worker_first(tick: NewTick) -> TickRecord | None:
        await record(dataclasses.replace(tick, worker_id="w2"))
        raise ScheduleBusyError(tick.schedule)

    monkeypatch.setattr(store, "record_tick", another_worker_first)
    with caplog.at_level(logging.INFO, logger="starlette_jobs.worker"):
        for _ in range(40):
            clock.advance(1)
            await worker.round()
    assert [m for m in caplog.messages if "locked" in m] == []
    recorded = await store.schedule_ticks("beat", 100)
    assert (len(recorded), {t.worker_id for t in recorded}) == (8, {"w2"})  # each once
