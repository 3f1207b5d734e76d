"""The worker registry's records: `NewWorker`, what a worker writes of itself as it starts, and
`WorkerRecord`, a live worker as `jobs.workers()` lists it (docs/workers.md)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

MISSED_HEARTBEATS = 3.0
"""A worker unseen for this many of its heartbeat intervals is dead: it is not listed, nor
counted as able to run a job, and its row is deleted. Three, so that one late heartbeat (a busy
pool, a slow statement) does not drop a live worker."""


@dataclass(frozen=True, slots=True)
class NewWorker:
    """What a worker writes of itself as it starts; the store adds the times."""

    id: str
    host: str
    pid: int
    queues: tuple[str, ...]
    job_names: tuple[str, ...]
    version: str
    # Seconds between two of its heartbeats: a row unseen for a few of them is a dead worker's.
    heartbeat_seconds: float
    # The schedules its code declares, (name, hash of the definition) by name
    # (docs/schedules.md, "Deploys").
    schedules: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    """A worker process as the registry holds it (`jobs.workers()`).

    Attributes:
        id: the worker id, unique per process (`Jobs.worker_id`; the `worker_id` of its jobs'
            events).
        host: the host name of its machine.
        pid: its process id on that host.
        queues: the queues it works, by name.
        job_names: the names of the jobs its code declares.
        version: the starlette-jobs version it runs.
        started_at: when it registered.
        last_seen: its latest heartbeat.
        heartbeat_seconds: seconds between two of its heartbeats (`lease_duration / 3`).
    """

    id: str
    host: str
    pid: int
    queues: tuple[str, ...]
    job_names: tuple[str, ...]
    version: str
    started_at: datetime
    last_seen: datetime
    heartbeat_seconds: float


@dataclass(frozen=True, slots=True)
class UnrunnableJobs:
    """Pending jobs of one name on one queue that no live worker can run: none in the registry
    both works the queue and declares the name (`jobs.unrunnable_jobs()`). During a rolling
    deploy these are the jobs only the new code declares, until a new worker starts.

    Attributes:
        queue: the queue they wait on.
        name: the job name no live worker of that queue declares.
        pending: how many of them are pending.
        oldest_run_at: when the first of them was due (or is: it may be later than now).
    """

    queue: str
    name: str
    pending: int
    oldest_run_at: datetime
