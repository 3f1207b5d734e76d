-- starlette-jobs 0006: periodic jobs (docs/schedules.md).

-- The tick a job was enqueued for, when a schedule enqueued it. Adding a column with no default
-- only changes the catalog: instant, whatever the table holds.
ALTER TABLE starlette_jobs ADD COLUMN scheduled_for timestamptz;

-- The schedules the workers' code declares, written by each worker at start (its own set:
-- upserted, and those its code no longer has deleted). A worker ticks a schedule only while
-- `definition_hash` is its own definition's.
CREATE TABLE starlette_jobs_schedules (
    name            text        PRIMARY KEY,
    definition      jsonb       NOT NULL,
    definition_hash text        NOT NULL,
    -- When this definition was written: ticks before it are not its own.
    defined_at      timestamptz NOT NULL DEFAULT now(),
    -- The latest tick recorded, and the job the latest enqueued tick made (overlap policies).
    last_tick_at    timestamptz,
    last_job_id     bigint,
    -- A tick waiting for the previous tick's job to finish (overlap 'one_waiting').
    waiting_tick_at timestamptz
);

-- What became of each tick: the primary key is what makes a tick happen once, whichever worker
-- inserts it first. 'enqueued' (job_id), 'skipped' (reason) or 'waiting'.
CREATE TABLE starlette_jobs_ticks (
    schedule    text        NOT NULL,
    tick_at     timestamptz NOT NULL,
    status      text        NOT NULL,
    reason      text,
    job_id      bigint,
    worker_id   text,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schedule, tick_at)
);
