"""`starlette-jobs workers`: the live workers of every process on the database (the worker
registry, docs/workers.md), then the pending jobs that none of them can run, as tables for
people or JSON lines for scripts."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from .._jobs import Jobs
from .._worker_records import UnrunnableJobs, WorkerRecord
from ._output import print_table

_COLUMNS = ("ID", "HOST", "PID", "QUEUES", "JOBS", "VERSION", "STARTED", "LAST SEEN")
_UNRUNNABLE_COLUMNS = ("QUEUE", "JOB", "PENDING", "OLDEST RUN AT")


async def print_workers(jobs: Jobs, *, as_json: bool) -> int:
    """Each worker; then each (queue, job name) that none of them can run. As JSON, one object
    a line: a worker's fields, or `{"unrunnable": {...}}`."""
    async with jobs:
        workers = await jobs.workers()
        unrunnable = await jobs.unrunnable_jobs()
    if as_json:
        for worker in workers:
            print(json.dumps(_as_dict(worker)))
        for stuck in unrunnable:
            print(json.dumps({"unrunnable": _unrunnable_dict(stuck)}))
        return 0
    if workers:
        print_table(_COLUMNS, map(_row, workers))
    else:
        print("no live workers: each worker writes itself in the registry as it starts")
    if unrunnable:
        print()
        print("pending jobs no live worker can run (none works their queue and declares them):")
        print_table(_UNRUNNABLE_COLUMNS, map(_unrunnable_row, unrunnable))
    return 0


def _row(worker: WorkerRecord) -> tuple[str, ...]:
    return (
        worker.id,
        worker.host,
        str(worker.pid),
        ",".join(worker.queues),
        ",".join(worker.job_names),
        worker.version,
        worker.started_at.isoformat(sep=" ", timespec="seconds"),
        worker.last_seen.isoformat(sep=" ", timespec="seconds"),
    )


def _as_dict(worker: WorkerRecord) -> dict[str, Any]:
    found = dataclasses.asdict(worker)
    found["queues"] = list(worker.queues)
    found["job_names"] = list(worker.job_names)
    found["started_at"] = worker.started_at.isoformat()
    found["last_seen"] = worker.last_seen.isoformat()
    return found


def _unrunnable_row(stuck: UnrunnableJobs) -> tuple[str, ...]:
    oldest = stuck.oldest_run_at.isoformat(sep=" ", timespec="seconds")
    return (stuck.queue, stuck.name, str(stuck.pending), oldest)


def _unrunnable_dict(stuck: UnrunnableJobs) -> dict[str, Any]:
    found = dataclasses.asdict(stuck)
    found["oldest_run_at"] = stuck.oldest_run_at.isoformat()
    return found
