"""The heartbeat never waits: not on a row another transaction holds, nor on other upkeep."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from starlette_jobs import JobStatus
from tests.conftest import StartJobs
from tests.integration.holding import Runs, held_open, reset


@pytest.fixture
def runs() -> Runs:
    return reset()


async def test_a_row_locked_by_an_operator_does_not_stall_the_other_leases_of_its_worker(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any], runs: Runs
) -> None:
    lease = 1.5
    async with (
        start_jobs(queues={"default": 2}, lease_duration=lease) as jobs,
        # Another worker, whose upkeep rescues any job whose lease ran out.
        start_jobs(queues={"elsewhere": 1}, lease_duration=lease),
    ):
        locked = await held_open.enqueue(key="locked")
        other = await held_open.enqueue(key="other")
        await runs.wait_for("start", "locked", 0)
        await runs.wait_for("start", "other", 0)
        async with connection.transaction():
            await connection.execute(
                "SELECT 1 FROM starlette_jobs WHERE id = $1 FOR UPDATE", locked
            )
            # The operator's transaction stays open for two leases.
            await asyncio.sleep(2 * lease)
            during = await jobs.get(other)
        # The locked job's lease ran out meanwhile: it may run again. So would the other one,
        # were its lease not renewed: let every run end, and count them.
        for key in ("locked", "other"):
            for run in (0, 1, 2):
                runs.gate(key, run).set()
        await jobs.drain(timeout=10)
        after = await jobs.get(other)
    # The other job's lease was renewed all along: never rescued, run once.
    assert during is not None
    assert (during.status, during.attempts, during.errors) == (JobStatus.RUNNING, 1, [])
    assert after is not None
    assert (after.status, after.attempts, after.errors) == (JobStatus.SUCCEEDED, 1, [])
    assert runs.count("start", "other") == 1
