"""`starlette-jobs workers`: the live workers of every process on the database (the worker
registry, docs/workers.md), as a table for people or JSON for scripts."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from .._jobs import Jobs
from .._worker_records import WorkerRecord

_COLUMNS = ("ID", "HOST", "PID", "QUEUES", "JOBS", "VERSION", "STARTED", "LAST SEEN")


async def print_workers(jobs: Jobs, *, as_json: bool) -> int:
    async with jobs:
        workers = await jobs.workers()
    if as_json:
        for worker in workers:
            print(json.dumps(_as_dict(worker)))
        return 0
    if not workers:
        print("no live workers: each worker writes itself in the registry as it starts")
        return 0
    rows = [_COLUMNS, *(_row(worker) for worker in workers)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
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
