"""Periodic jobs across real worker processes: three workers racing on a schedule that ticks
every second enqueue each tick exactly once, and a restart across ticks runs what the catch-up
policy says, once."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from starlette_jobs.worker._ticker import ON_TIME_SLACK
from tests.processes.support import ROOT, LoggedProcess, eventually

APP = "tests.processes.periodic_app:jobs"
SECOND = timedelta(seconds=1)


def start(dsn: str, run_log: Path, catch_up: str = "latest") -> LoggedProcess:
    env = {**os.environ, "DATABASE_URL": dsn, "RUN_LOG": str(run_log), "CATCH_UP": catch_up}
    return LoggedProcess([sys.executable, "-m", "starlette_jobs", "worker", APP], cwd=ROOT, env=env)


def stop(worker: LoggedProcess) -> None:
    worker.send(signal.SIGTERM)
    assert worker.wait(30) == 0, worker.output


async def ticks(connection: asyncpg.Connection[Any]) -> list[asyncpg.Record]:
    return await connection.fetch(
        "SELECT tick_at, status, reason, job_id, worker_id FROM starlette_jobs_ticks"
        " WHERE schedule = 'every-second' ORDER BY tick_at"
    )


async def jobs_per_tick(connection: asyncpg.Connection[Any]) -> Counter[datetime]:
    rows = await connection.fetch(
        "SELECT scheduled_for FROM starlette_jobs WHERE scheduled_for IS NOT NULL"
    )
    return Counter(row[0] for row in rows)


def runs(run_log: Path) -> Counter[float]:
    if not run_log.exists():
        return Counter()
    return Counter(float(line.split()[0]) for line in run_log.read_text().splitlines())


@pytest.fixture
async def connection(database_dsn: str) -> Any:
    conn = await asyncpg.connect(database_dsn)
    yield conn
    await conn.close()


async def test_three_workers_enqueue_each_tick_exactly_once(
    database_dsn: str, run_log: Path, connection: asyncpg.Connection[Any]
) -> None:
    # Catch-up within a minute: a tick is enqueued even if all three processes stall past the
    # slack at once on a loaded machine, so a gap could only be a tick lost, not a policy.
    workers = [start(database_dsn, run_log, catch_up="60") for _ in range(3)]
    try:
        for worker in workers:
            worker.wait_for("schedules declared")
        raced_from = len(await ticks(connection))

        async def twelve_more() -> bool:
            return len(await ticks(connection)) >= raced_from + 12

        await eventually(twelve_more, 40, "12 ticks with three workers running")
    finally:
        for worker in workers:
            stop(worker)
    recorded = await ticks(connection)
    at = [row["tick_at"] for row in recorded]
    # One tick a second, none left out, none twice (the primary key could not hold two).
    assert at == [at[0] + n * SECOND for n in range(len(at))]
    assert {row["status"] for row in recorded} == {"enqueued"}
    per_tick = await jobs_per_tick(connection)
    assert per_tick == dict.fromkeys(at, 1)
    job_ids = [row["job_id"] for row in recorded]
    assert len(set(job_ids)) == len(job_ids)
    ran = runs(run_log)
    # A job enqueued just before the workers stopped may be left pending; none ran twice.
    assert set(ran.values()) <= {1}
    assert len(ran) >= len(at) - 3
    winners = Counter(row["worker_id"] for row in recorded)
    print("ticks recorded per worker:", dict(winners))


@pytest.mark.parametrize("catch_up", ["latest", "none"])
async def test_a_restart_across_ticks_runs_what_the_catch_up_policy_says_once(
    database_dsn: str, run_log: Path, connection: asyncpg.Connection[Any], catch_up: str
) -> None:
    first = start(database_dsn, run_log, catch_up)
    try:
        first.wait_for("schedules declared")

        async def three() -> bool:
            return len(await ticks(connection)) >= 3

        await eventually(three, 30, "three ticks")
    finally:
        stop(first)
    before = await ticks(connection)
    stopped_at = before[-1]["tick_at"]
    # Every worker is stopped: let ticks pass, more than the slack a starting worker gives
    # ticks due just before it started. A sleep for time to pass, not for a worker.
    await asyncio.sleep(ON_TIME_SLACK.total_seconds() + 3)
    second = start(database_dsn, run_log, catch_up)
    try:
        second.wait_for("schedules declared")

        async def three_more() -> bool:
            return len(await ticks(connection)) >= len(before) + 3

        await eventually(three_more, 30, "ticks after the restart")
    finally:
        stop(second)
    after = [row for row in await ticks(connection) if row["tick_at"] > stopped_at]
    caught_up, on_time = after[0], after[1:]
    # The ticks missed while no worker ran left one trace: the latest of them.
    assert caught_up["tick_at"] > stopped_at + SECOND
    times = [row["tick_at"] for row in on_time]
    assert times == [caught_up["tick_at"] + n * SECOND for n in range(1, len(times) + 1)]
    assert {row["status"] for row in on_time} == {"enqueued"}
    per_tick = await jobs_per_tick(connection)
    if catch_up == "latest":
        assert caught_up["status"] == "enqueued"
        assert caught_up["reason"].startswith("caught up: the latest")
        assert per_tick[caught_up["tick_at"]] == 1
    else:
        assert (caught_up["status"], caught_up["job_id"]) == ("skipped", None)
        assert caught_up["reason"] == "missed while no worker ran (catch_up='none')"
        assert caught_up["tick_at"] not in per_tick
    assert set(per_tick.values()) == {1}
    assert set(runs(run_log).values()) <= {1}
