"""The worker module of the periodic jobs' process tests: a schedule that ticks every second.
Apart from `worker_app.py`, whose workers every other process test starts: they must not tick.

Each run of the job appends "<tick as epoch seconds> <pid>" to $RUN_LOG. $CATCH_UP is the
schedule's catch-up policy: "latest" (unless set), "none", or a window in seconds. Every worker
of a test gets the same, or they would declare different definitions.
"""

from __future__ import annotations

import os
from datetime import timedelta

from starlette_jobs import Jobs, current_job, job, periodic
from tests.processes.worker_app import append_to_run_log

jobs = Jobs(queues={"periodic": 5}, poll_interval=0.2)


CATCH_UP = os.environ.get("CATCH_UP", "latest")


@periodic(
    "* * * * * *",
    name="every-second",
    catch_up=CATCH_UP if CATCH_UP in ("none", "latest") else timedelta(seconds=float(CATCH_UP)),  # type: ignore[arg-type]
)
@job(queue="periodic")
async def every_second() -> None:
    me = current_job()
    assert me is not None
    assert me.scheduled_for is not None
    append_to_run_log(f"{me.scheduled_for.timestamp():.0f} {os.getpid()}\n")
