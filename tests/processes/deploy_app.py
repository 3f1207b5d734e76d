"""The new code of a rolling deploy (processes/test_rolling_deploy.py): all of worker_app's jobs
and one more, `invoice`, that a worker started from worker_app does not declare."""

from __future__ import annotations

import os

from starlette_jobs import Retry, job
from tests.processes.worker_app import jobs as jobs
from tests.processes.worker_app import log


@job(name="tests.processes.deploy_app.invoice", retry=Retry.fixed(max_attempts=3, delay=0.1))
async def invoice(n: int) -> int:
    log("start", n)
    log("done", n)
    return os.getpid()
