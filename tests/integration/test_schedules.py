"""Periodic jobs end to end in one process, on PostgreSQL and memory alike: a tick's job reads
the tick it was scheduled for, `jobs.get` shows it, `jobs.schedules()` and `jobs.ticks()` list
what happened, several `Jobs` on one store tick once, and an enqueue-only `Jobs` does not
tick."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import asyncpg
import pytest

from starlette_jobs import Jobs, Queue, TickStatus, current_job, job, periodic
from tests.conftest import eventually

seen: list[tuple[str, datetime | None]] = []


@job(name="tests.integration.pulse", queue="pulse")
async def pulse(label: str) -> None:
    me = current_job()
    assert me is not None
    seen.append((label, me.scheduled_for))


@pytest.fixture
def every_second() -> None:
    seen.clear()
    periodic("* * * * * *", name="pulse", arguments={"label": "tick"})(pulse)


async def ran(tick: datetime) -> bool:
    return ("tick", tick) in seen


async def ticks(jobs: Jobs, count: int) -> bool:
    return len(await jobs.ticks("pulse", limit=100)) >= count


@pytest.mark.usefixtures("every_second")
async def test_a_tick_enqueues_a_job_that_reads_its_tick(jobs_dsn: str) -> None:
    async with Jobs(jobs_dsn, queues={"pulse": 2}) as jobs:
        await eventually(lambda: ticks(jobs, 2), "two ticks")
        (schedule,) = await jobs.schedules()
        recent = await jobs.ticks("pulse", limit=2)
        await eventually(lambda: ran(recent[1].at), "the tick's job")
    assert (schedule.name, schedule.job, schedule.queue) == (
        "pulse",
        "tests.integration.pulse",
        "pulse",
    )
    assert (schedule.cron, schedule.timezone, schedule.arguments) == (
        "* * * * * *",
        "UTC",
        {"label": "tick"},
    )
    assert schedule.last_tick is not None
    assert schedule.next_tick is not None
    assert schedule.next_tick > schedule.last_tick.at
    assert [t.status for t in recent] == [TickStatus.ENQUEUED] * 2
    assert recent[0].at > recent[1].at
    async with Jobs(jobs_dsn, queues={}) as jobs:
        record = await jobs.get(recent[1].job_id or 0)
    assert record is not None
    assert record.scheduled_for == recent[1].at
    assert record.arguments == {"label": "tick"}


async def test_a_schedule_declared_after_the_worker_started_ticks(jobs_dsn: str) -> None:
    """A `@periodic` in a module the app imports after `Jobs` started (lazily, say)."""
    seen.clear()
    async with Jobs(jobs_dsn, queues={"pulse": 2}) as jobs:
        periodic("* * * * * *", name="pulse", arguments={"label": "tick"})(pulse)
        await eventually(lambda: ticks(jobs, 1), "a tick of the schedule declared late")
        (tick,) = await jobs.ticks("pulse", limit=1)
        await eventually(lambda: ran(tick.at), "the tick's job")
        assert [s.name for s in await jobs.schedules()] == ["pulse"]


@pytest.mark.usefixtures("every_second")
async def test_several_jobs_on_one_store_tick_once(jobs_dsn: str) -> None:
    async with (
        Jobs(jobs_dsn, queues={"pulse": 2}) as first,
        Jobs(jobs_dsn, queues={"pulse": 2}),
        Jobs(jobs_dsn, queues={"pulse": 2}),
    ):
        await eventually(lambda: ticks(first, 4), "four ticks", timeout=15)
        recorded = await first.ticks("pulse", limit=100)
        enqueued = await first.list(queue="pulse", limit=100)
    at = [t.at for t in recorded]
    assert len(set(at)) == len(at)
    assert sorted(j.scheduled_for for j in enqueued if j.scheduled_for) == sorted(at)


@pytest.mark.usefixtures("every_second")
async def test_a_jobs_that_only_enqueues_does_not_tick(jobs_dsn: str) -> None:
    async with Jobs(jobs_dsn, queues={}) as jobs:
        await asyncio.sleep(1.5)  # long enough for a tick: none may come
        assert await jobs.schedules() == []
        assert await jobs.ticks("pulse") == []


async def test_an_operators_lock_on_one_schedule_holds_up_no_other(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    """An operator's session holds one schedule's row (`SELECT ... FOR UPDATE`, or the `DELETE`
    docs/schedules.md suggests, in a transaction left open): the other schedules tick on. Every
    round used to wait on that row until the statement timeout (8 s), fail, and start again 5 s
    later: no other schedule ticked while the lock lasted. Once it is gone, the locked one
    ticks again."""
    seen.clear()
    periodic("* * * * * *", name="a-locked", arguments={"label": "a"})(pulse)
    periodic("* * * * * *", name="b-free", arguments={"label": "b"})(pulse)
    async with Jobs(database_dsn, queues={"pulse": 4}) as jobs:
        await eventually(lambda: ticks_of(jobs, "a-locked", 1), "a tick of a-locked")
        async with connection.transaction():
            await connection.execute(
                "SELECT FROM starlette_jobs_schedules WHERE name = 'a-locked' FOR UPDATE"
            )
            before = len(await jobs.ticks("b-free", limit=100))
            await eventually(
                lambda: ticks_of(jobs, "b-free", before + 3), "three ticks of b-free", timeout=6
            )
        held = len(await jobs.ticks("a-locked", limit=100))
        await eventually(lambda: ticks_of(jobs, "a-locked", held + 1), "a-locked again")


@pytest.mark.usefixtures("every_second")
async def test_a_latest_tick_a_day_ahead_of_the_clock_holds_up_the_schedule_no_longer(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    """The database's clock (and the workers') ran a day ahead, then was set right: the
    schedule's latest tick is a day ahead. Every tick before it was refused as decided already,
    for a day, silently; now the ticks go on from the clock's time."""
    async with Jobs(database_dsn, queues={"pulse": 2}) as jobs:
        await eventually(lambda: ticks(jobs, 1), "a first tick")
        await connection.execute(
            "UPDATE starlette_jobs_schedules SET last_tick_at = now() + interval '1 day'"
        )
        recorded = len(await jobs.ticks("pulse", limit=100))
        await eventually(lambda: ticks(jobs, recorded + 2), "ticks again")
        latest = await jobs.ticks("pulse", limit=1)
        now = await connection.fetchval("SELECT now()")
        assert abs((latest[0].at - now).total_seconds()) < 5


async def ticks_of(jobs: Jobs, schedule: str, count: int) -> bool:
    return len(await jobs.ticks(schedule, limit=100)) >= count


async def test_a_schedule_row_this_process_cannot_read_is_listed_as_far_as_it_can(
    database_dsn: str, connection: asyncpg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    """A row another version wrote, or an operator edited: a zone this machine's tzdata lacks,
    a definition without its fields. `jobs.schedules()` raised on it, and showed none of the
    others (nor the dashboard's page, nor the CLI's table). Now it lists the row with what it
    can read, no next tick, and logs why once."""
    good = (
        '{"job": "j", "queue": "q", "cron": "* * * * *", "timezone": "UTC", "arguments": {},'
        ' "catch_up": "latest", "overlap": "allow", "priority": 0, "max_attempts": 3}'
    )
    await connection.execute(
        "INSERT INTO starlette_jobs_schedules (name, definition, definition_hash)"
        " VALUES ('good', $1::jsonb, 'h1'), ('odd', $2::jsonb, 'h2'), ('bare', $3::jsonb, 'h3'),"
        " ('list', '[]', 'h4'), ('null', 'null', 'h5'), ('vast', $4::jsonb, 'h6')",
        good, good.replace('"UTC"', '"Mars/Olympus_Mons"'), '{"job": "j", "catch_up": []}',
        good.replace('"latest"', "1e300"),
    )  # fmt: skip
    async with Jobs(database_dsn, queues={}) as jobs:
        listed = {schedule.name: schedule for schedule in await jobs.schedules()}
        again = await jobs.schedules()
    assert sorted(listed) == ["bare", "good", "list", "null", "odd", "vast"]
    assert listed["good"].next_tick is not None
    assert (listed["odd"].timezone, listed["odd"].next_tick) == ("Mars/Olympus_Mons", None)
    assert (listed["bare"].job, listed["bare"].cron, listed["bare"].next_tick) == ("j", "", None)
    assert (listed["list"].job, listed["null"].next_tick) == ("", None)
    assert (listed["vast"].catch_up, listed["vast"].next_tick is not None) == ("", True)
    assert [schedule.name for schedule in again] == sorted(listed)
    warned = [r.getMessage() for r in caplog.records if "cannot read" in r.getMessage()]
    assert len(warned) == 5
    assert any("'odd'" in message and "Mars/Olympus_Mons" in message for message in warned)


async def test_ticks_refuses_a_bad_limit(jobs_memory: str) -> None:
    async with Jobs(jobs_memory, queues={}) as jobs:
        with pytest.raises(ValueError, match="limit must be a positive integer"):
            await jobs.ticks("pulse", limit=0)


@pytest.mark.usefixtures("every_second")
async def test_a_tick_in_a_limited_queue_reads_its_tick_too(jobs_dsn: str) -> None:
    # A limited queue's jobs are claimed by another statement than claim_batch: the tick
    # must reach them all the same.
    limited = Queue(concurrency=2, global_limit=1)
    async with Jobs(jobs_dsn, queues={"pulse": limited}) as jobs:
        await eventually(lambda: ticks(jobs, 2), "two ticks")
        recent = await jobs.ticks("pulse", limit=2)
        await eventually(lambda: ran(recent[1].at), "the tick's job, with its tick")
