"""SIGTERM to a worker process whose network to PostgreSQL went silent (see tests/faultproxy.py)."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from starlette_jobs import Jobs
from starlette_jobs.worker._shutdown import shutdown_bound
from tests.faultproxy import FaultProxy
from tests.integration.test_silent_network import SHUTDOWN_SLACK
from tests.processes.conftest import StartWorker
from tests.processes.support import count, read_run_log, wait_until
from tests.processes.worker_app import work

GRACE = 2.0
LEASE = 6.0

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


async def test_sigterm_on_a_silent_network_exits_within_the_grace_and_the_bound(
    fault_proxy: FaultProxy,
    database_dsn: str,
    start_worker: StartWorker,
    run_log: Path,
    connection: asyncpg.Connection[Any],
) -> None:
    async with Jobs(database_dsn, queues={}) as producer:
        ids = await producer.enqueue_many(work, [{"n": n, "seconds": 60} for n in range(3)])
    worker = start_worker(
        "--queue", "default=4", "--shutdown-grace", str(GRACE), "--lease-duration", str(LEASE),
        dsn=fault_proxy.dsn,
    )  # fmt: skip
    await asyncio.to_thread(
        wait_until, lambda: len(count(read_run_log(run_log), "start")) == 3, what="3 starts"
    )
    fault_proxy.blackhole()
    signalled = time.monotonic()
    worker.send(signal.SIGTERM)
    code = await asyncio.to_thread(worker.wait, 120)
    took = time.monotonic() - signalled
    fault_proxy.heal()
    rows = await connection.fetch(
        "SELECT id, status, lease_expires_at FROM starlette_jobs WHERE id = ANY($1::bigint[])",
        ids,
    )
    print(f"SIGTERM with a {GRACE} s grace on a silent network: exit {code} after {took:.1f} s")
    bound = shutdown_bound(GRACE, LEASE) + SHUTDOWN_SLACK
    assert took <= bound, f"exit took {took:.1f} s:\n{worker.output}"
    assert code == 0, worker.output
    # Released, or left to a lease that expires: never running for good.
    assert all(
        row["status"] == "pending"
        or (row["status"], row["lease_expires_at"] is None) == ("running", False)
        for row in rows
    ), rows
