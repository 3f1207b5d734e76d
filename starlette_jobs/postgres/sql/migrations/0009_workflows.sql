-- starlette-jobs 0009: workflows, jobs that wait for other jobs (docs/workflows.md).

-- One row per workflow enqueued: its steps are jobs whose workflow_id is its id.
CREATE TABLE starlette_jobs_workflows (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text        NOT NULL,
    -- The trace context of the enqueue (as each step's own), to link every step's span to it.
    trace_context jsonb,
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- A step is a job row with these set. A step that waits for others is 'waiting': a status no
-- claim looks at (the claim index holds pending rows only). Its counters are changed by the
-- statement that writes the outcome of a step it waits for, on the row locked: the last one
-- to finish releases it (to 'pending') or cancels it, once. All NULL for a job of no workflow.
ALTER TABLE starlette_jobs
    ADD COLUMN workflow_id      bigint,
    ADD COLUMN step             text,
    -- The ids of the steps it waits for, and of the steps that wait for it (the graph, kept).
    ADD COLUMN upstream         bigint[],
    ADD COLUMN dependents       bigint[],
    -- How many of the steps it waits for have not finished yet, and how many ended otherwise
    -- than succeeded; past allowed_failures of those it is cancelled (0: every one must
    -- succeed; all of them: it runs whatever their outcome; M - N: at least N of M).
    ADD COLUMN upstream_left    integer,
    ADD COLUMN upstream_failed  integer,
    ADD COLUMN allowed_failures integer,
    -- Its dependents have counted its outcome. The statements that finish a step tell its
    -- dependents at once; a path that cannot (a rescue) leaves this false, and upkeep tells
    -- them (`settle_steps`), through the index below, empty while nothing is owed.
    ADD COLUMN settled          boolean NOT NULL DEFAULT false;

CREATE INDEX starlette_jobs_workflow_idx
    ON starlette_jobs (workflow_id)
    WHERE workflow_id IS NOT NULL;

CREATE INDEX starlette_jobs_unsettled_idx
    ON starlette_jobs (id)
    WHERE dependents IS NOT NULL AND NOT settled
          AND status IN ('succeeded', 'failed', 'cancelled');
