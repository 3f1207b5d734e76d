-- starlette-jobs 0001: the jobs table and the indexes that serve claiming, rescuing and pruning.

CREATE TABLE starlette_jobs (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name             text        NOT NULL,
    queue            text        NOT NULL,
    payload          jsonb       NOT NULL,
    status           text        NOT NULL DEFAULT 'pending'
        CONSTRAINT starlette_jobs_status_check
        CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'cancelled')),
    priority         integer     NOT NULL DEFAULT 0,
    run_at           timestamptz NOT NULL DEFAULT now(),
    attempts         integer     NOT NULL DEFAULT 0 CONSTRAINT starlette_jobs_attempts_check
        CHECK (attempts >= 0),
    max_attempts     integer     NOT NULL CONSTRAINT starlette_jobs_max_attempts_check
        CHECK (max_attempts >= 1),
    -- Set by each claim and cleared when the attempt ends: every write after the claim must
    -- name it, so a worker that lost its lease cannot overwrite a newer attempt.
    lease_token      uuid,
    lease_expires_at timestamptz,
    worker_id        text,
    last_error       text,
    -- One object per failed attempt: {"attempt", "error", "at", "worker_id"}.
    errors           jsonb       NOT NULL DEFAULT '[]'::jsonb,
    -- W3C traceparent/tracestate, baggage and the correlation id of the enqueuing request.
    trace_context    jsonb,
    unique_key       text,
    result           jsonb,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,
    CONSTRAINT starlette_jobs_running_has_lease_check
        CHECK ((status = 'running') = (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL))
);

-- The claim query: due pending jobs of one queue, highest priority first, then oldest.
CREATE INDEX starlette_jobs_claim_idx
    ON starlette_jobs (queue, priority DESC, run_at, id)
    WHERE status = 'pending';

-- Rescue of jobs whose worker stopped renewing its lease.
CREATE INDEX starlette_jobs_lease_idx
    ON starlette_jobs (lease_expires_at)
    WHERE status = 'running';

-- Pruning of finished jobs, and "recent jobs" listings.
CREATE INDEX starlette_jobs_finished_idx
    ON starlette_jobs (finished_at)
    WHERE status IN ('succeeded', 'failed', 'cancelled');

-- At most one live (pending or running) job per unique key.
CREATE UNIQUE INDEX starlette_jobs_unique_key_idx
    ON starlette_jobs (unique_key)
    WHERE unique_key IS NOT NULL AND status IN ('pending', 'running');
