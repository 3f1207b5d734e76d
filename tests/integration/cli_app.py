"""A worker module for the CLI tests: each job appends "<n> <pid>" to $RUN_LOG."""

from __future__ import annotations

import asyncio
import os

from starlette_jobs import Jobs, Retry, current_job, job
from tests.processes.worker_app import append_to_run_log

jobs = Jobs(queues={"default": 5}, poll_interval=0.2)


@job(retry=Retry.fixed(max_attempts=3, delay=0.1))
async def record_run(n: int) -> None:
    await asyncio.sleep(0.005)  # a little work, so both workers get a share
    append_to_run_log(f"{n} {os.getpid()}\n")


@job(retry=Retry.fixed(max_attempts=3, delay=0.2))
async def fails_twice(n: int) -> None:
    """Fails its first two attempts, then records its run like `record_run`."""
    running = current_job()
    assert running is not None
    if running.attempt < 3:
        raise RuntimeError(f"attempt {running.attempt}")
    append_to_run_log(f"{n} {os.getpid()}\n")
