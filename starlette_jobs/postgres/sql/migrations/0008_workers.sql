-- starlette-jobs 0008: the worker registry, one row per live worker process (docs/workers.md).

-- Written by each worker as it starts, refreshed by its heartbeat (every lease_duration / 3,
-- also while it drains at shutdown), deleted when it stops cleanly; a row unseen for a few of
-- its heartbeats is a dead worker's, deleted by any worker's upkeep.
CREATE TABLE starlette_jobs_workers (
    -- The worker id, unique per process (host:pid:random): the worker_id of its jobs' events.
    id                text        PRIMARY KEY,
    host              text        NOT NULL,
    pid               integer     NOT NULL,
    queues            text[]      NOT NULL,
    -- The names of the jobs its code declares.
    job_names         text[]      NOT NULL,
    version           text        NOT NULL,
    heartbeat_seconds float8      NOT NULL,
    started_at        timestamptz NOT NULL DEFAULT now(),
    last_seen         timestamptz NOT NULL DEFAULT now()
);
