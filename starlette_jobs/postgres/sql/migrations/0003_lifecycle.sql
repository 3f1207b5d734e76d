-- starlette-jobs 0003: a job's history (events), progress, cancelling a running job, and
-- waiting for an outcome.

ALTER TABLE starlette_jobs
    -- The last progress the running job reported (any JSON value).
    ADD COLUMN progress            jsonb,
    -- Set by `jobs.cancel` on a running job: it ends `cancelled`, whatever its attempt does.
    ADD COLUMN cancel_requested_at timestamptz,
    -- Someone waits for this job's outcome (`jobs.wait`): the statement that finishes it sends
    -- a NOTIFY. Only then: a NOTIFY per finished job would cost every drain.
    ADD COLUMN outcome_wanted      boolean NOT NULL DEFAULT false;

-- One row per change of a job's state, written by the statement that makes the change. No
-- foreign key: it would lock the job row for every event, and pruning deletes a job's events
-- in the same statement as the job. The primary key is the one index: a job's events in order.
CREATE TABLE starlette_jobs_events (
    job_id    bigint      NOT NULL,
    id        bigint      GENERATED ALWAYS AS IDENTITY,
    at        timestamptz NOT NULL DEFAULT now(),
    kind      text        NOT NULL,
    -- The job's status and attempt count right after the change.
    status    text        NOT NULL,
    attempt   integer     NOT NULL,
    worker_id text,
    error     text,
    -- When the job is due next, if it went (back) to pending.
    run_at    timestamptz,
    PRIMARY KEY (job_id, id)
);

ALTER TABLE starlette_jobs_events SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.01
);
