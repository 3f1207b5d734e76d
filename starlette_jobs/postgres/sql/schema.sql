-- The schema that applying every migration in migrations/ produces, in one file: the place to
-- read what the tables look like today. tests/test_migrations.py holds the two to each other.

CREATE TABLE starlette_jobs_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE starlette_jobs (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name             text        NOT NULL,
    queue            text        NOT NULL,
    payload          jsonb       NOT NULL,
    -- 'pending', 'running', 'succeeded', 'failed' or 'cancelled'. No CHECK constraints: they
    -- cost every statement that writes the table (migrations/0005_no_check_constraints.sql).
    status           text        NOT NULL DEFAULT 'pending',
    priority         integer     NOT NULL DEFAULT 0,
    run_at           timestamptz NOT NULL DEFAULT now(),
    attempts         integer     NOT NULL DEFAULT 0,
    max_attempts     integer     NOT NULL,
    -- Set exactly while the job is running, with lease_expires_at.
    lease_token      uuid,
    lease_expires_at timestamptz,
    worker_id        text,
    last_error       text,
    errors           jsonb       NOT NULL DEFAULT '[]'::jsonb,
    trace_context    jsonb,
    unique_key       text,
    result           jsonb,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,
    -- The last progress the running job reported (any JSON value).
    progress            jsonb,
    -- Set by `jobs.cancel` on a running job: it ends `cancelled`, whatever its attempt does.
    cancel_requested_at timestamptz,
    -- Someone waits for the outcome (`jobs.wait`): the statement that finishes it NOTIFYs.
    outcome_wanted      boolean NOT NULL DEFAULT false,
    -- Held for as long as the job is kept (`configure(idempotency_key=...)`).
    idempotency_key     text,
    -- The tick a schedule enqueued the job for (docs/schedules.md).
    scheduled_for       timestamptz,
    -- Workflows (docs/workflows.md; migrations/0009_workflows.sql): all NULL for a job of none.
    workflow_id      bigint,
    step             text,
    -- The ids of the steps it waits for, and of the steps that wait for it.
    upstream         bigint[],
    dependents       bigint[],
    -- Steps it waits for not finished yet, and those that ended otherwise than succeeded;
    -- past allowed_failures of those it is cancelled.
    upstream_left    integer,
    upstream_failed  integer,
    allowed_failures integer,
    -- Its dependents have counted its outcome.
    settled          boolean NOT NULL DEFAULT false
) WITH (
    -- High churn: vacuum and analyze after 1 % of the rows changed, not the default 20 %.
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.01
);

-- Out of line when large, but not compressed: compressing a fan-in's 10,000 ids cost more
-- than it saved (migrations/0010_workflow_arrays_uncompressed.sql).
ALTER TABLE starlette_jobs
    ALTER COLUMN upstream SET STORAGE EXTERNAL,
    ALTER COLUMN dependents SET STORAGE EXTERNAL;

CREATE INDEX starlette_jobs_claim_idx
    ON starlette_jobs (queue, priority DESC, run_at, id)
    WHERE status = 'pending';

CREATE INDEX starlette_jobs_lease_idx
    ON starlette_jobs (lease_expires_at)
    WHERE status = 'running';

CREATE INDEX starlette_jobs_finished_idx
    ON starlette_jobs (finished_at)
    WHERE status IN ('succeeded', 'failed', 'cancelled');

CREATE UNIQUE INDEX starlette_jobs_unique_key_idx
    ON starlette_jobs (unique_key)
    WHERE unique_key IS NOT NULL AND status IN ('pending', 'running');

CREATE UNIQUE INDEX starlette_jobs_idempotency_key_idx
    ON starlette_jobs (name, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE INDEX starlette_jobs_workflow_idx
    ON starlette_jobs (workflow_id)
    WHERE workflow_id IS NOT NULL;

-- The workflows that still have steps to run: retention keeps all their steps.
CREATE INDEX starlette_jobs_unfinished_steps_idx
    ON starlette_jobs (workflow_id)
    WHERE workflow_id IS NOT NULL AND status IN ('pending', 'waiting', 'running');

CREATE INDEX starlette_jobs_unsettled_idx
    ON starlette_jobs (id)
    WHERE dependents IS NOT NULL AND NOT settled
          AND status IN ('succeeded', 'failed', 'cancelled');

-- Counts per status that do not grow with the table (jobs.status_counts, docs/dashboard.md):
-- the waiting steps counted exactly, each finished status up to a cap, per queue or in all
-- (migrations/0013_status_counts.sql).
CREATE INDEX starlette_jobs_status_idx
    ON starlette_jobs (status, queue)
    WHERE status IN ('waiting', 'succeeded', 'failed', 'cancelled');

-- A job's history: one row per change of its state, written by the statement that makes the
-- change (see docs/events.md). No foreign key; pruning deletes a job's events with the job.
CREATE TABLE starlette_jobs_events (
    job_id    bigint      NOT NULL,
    id        bigint      GENERATED ALWAYS AS IDENTITY,
    at        timestamptz NOT NULL DEFAULT now(),
    kind      text        NOT NULL,
    status    text        NOT NULL,
    attempt   integer     NOT NULL,
    worker_id text,
    error     text,
    run_at    timestamptz,
    -- Who asked for an operator's change (`by=`; migrations/0011_event_actor.sql), else NULL.
    actor     text,
    -- On an event that ends an attempt, that attempt's claim (a claim writes no row of its own;
    -- migrations/0017_claims_in_ending_events.sql), else NULL.
    claimed_at      timestamptz,
    claimed_attempt integer,
    PRIMARY KEY (job_id, id)
) WITH (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.01
);

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

-- One row per queue: paused or not, and the limits its workers declared (docs/limits.md;
-- migrations/0007_queue_controls.sql). A queue with no row is neither paused nor limited.
CREATE TABLE starlette_jobs_queues (
    name          text          PRIMARY KEY,
    paused        boolean       NOT NULL DEFAULT false,
    -- At most this many of the queue's jobs run at once across all workers; NULL: no limit.
    global_limit  integer,
    -- At most key_limit of its jobs run at once per value of their argument limit_key (read
    -- from the payload); both NULL: no such limit.
    limit_key     text,
    key_limit     integer,
    -- At most rate_limit of its jobs start in any rate_period seconds (NULL: no limit); the
    -- latest rate_limit start times are kept in recent_starts.
    rate_limit    integer,
    rate_period   float8        NOT NULL DEFAULT 1,
    recent_starts timestamptz[] NOT NULL DEFAULT '{}',
    -- One more with each claim that takes jobs of the queue: a claim that finds it changed
    -- since its snapshot was taken counts no more on that snapshot (queries.sql).
    claim_seq     bigint        NOT NULL DEFAULT 0,
    updated_at    timestamptz   NOT NULL DEFAULT now()
);

-- One row per live worker process (docs/workers.md; migrations/0008_workers.sql): written as it
-- starts, refreshed by its heartbeat, deleted when it stops cleanly or by upkeep once unseen.
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
    last_seen         timestamptz NOT NULL DEFAULT now(),
    -- The schedules its code declares: {name: hash of the definition}.
    schedules         jsonb       NOT NULL DEFAULT '{}'
);

-- One row per workflow enqueued (docs/workflows.md): its steps are jobs of its workflow_id.
CREATE TABLE starlette_jobs_workflows (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text        NOT NULL,
    trace_context jsonb,
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- Bulk actions (docs/dashboard.md; migrations/0012_bulk_actions.sql):
-- Who asked to retry or cancel every job of a filter, when, and how far it has got: the one
-- audit record of the action, and the progress its page shows. Each batch changes its jobs and
-- advances this row in one statement, so the row never claims more than was done. A row left
-- unfinished (its process stopped) runs on from `last_id` when run again.
CREATE TABLE starlette_jobs_bulk_actions (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- 'retry' or 'cancel'.
    action      text        NOT NULL,
    -- Who asked (the dashboard's authorize hook's answer), written in each job's event too.
    by_whom     text,
    -- The filter: the queue, and the status and the job name if given.
    queue       text        NOT NULL,
    status      text,
    name        text,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    -- The jobs it applied to when it started, and those changed so far.
    matched     bigint      NOT NULL,
    done        bigint      NOT NULL DEFAULT 0,
    -- The keyset: the last job id looked at, and the highest job id when it started (jobs
    -- enqueued since are left out).
    last_id     bigint      NOT NULL DEFAULT 0,
    upper_id    bigint      NOT NULL,
    -- The time bound (migrations/0014): only the jobs that finished at or after it.
    finished_after timestamptz
);

-- Finished bulk records are pruned with the jobs' retention (worker/_retention.py).
CREATE INDEX starlette_jobs_bulk_finished_idx
    ON starlette_jobs_bulk_actions (finished_at)
    WHERE finished_at IS NOT NULL;

-- Throughput (docs/dashboard.md; migrations/0015_throughput.sql):
-- Each worker counts in memory the attempts it ends and adds its counts here every few seconds
-- in one statement, which also deletes the minutes older than an hour: a few rows per queue,
-- read whole by the overview, where counting the jobs finished in the last minutes would read
-- as many rows as finished (at 5,000 jobs/s, 1.5 M in five minutes).
CREATE TABLE starlette_jobs_throughput (
    queue     text        NOT NULL,
    -- The minute's start, by the clock of the workers that counted.
    minute    timestamptz NOT NULL,
    succeeded bigint      NOT NULL DEFAULT 0,
    -- Attempts that failed with no attempt left, and those that left a retry.
    failed    bigint      NOT NULL DEFAULT 0,
    retried   bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, minute)
);
