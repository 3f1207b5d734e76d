"""The worker module of processes/test_completions.py: a job that writes a row and its own success
in one transaction (`current_job().complete_in`), then dies by SIGKILL before the worker hears
of it, the first time it gets that far (a marker file beside the run log remembers)."""

from __future__ import annotations

import os
import signal

import asyncpg

from starlette_jobs import Jobs, Retry, current_job, job
from tests.processes.worker_app import log

jobs = Jobs(queues={"default": 2}, poll_interval=0.2)


@job(name="tests.processes.complete_app.charge", retry=Retry.fixed(max_attempts=3, delay=0.1))
async def charge(n: int) -> str:
    log("start", n)
    me = current_job()
    assert me is not None
    connection = await asyncpg.connect(os.environ["DATABASE_URL"])
    try:
        async with connection.transaction():
            await connection.execute("INSERT INTO charges (n, pid) VALUES ($1, $2)", n, os.getpid())
            await me.complete_in(connection, charge, f"charged {n}")
    finally:
        await connection.close()
    log("committed", n)
    try:
        os.close(os.open(os.environ["RUN_LOG"] + ".killed", os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return "returned"
    os.kill(os.getpid(), signal.SIGKILL)  # committed; the worker never hears of it
    return "never"
