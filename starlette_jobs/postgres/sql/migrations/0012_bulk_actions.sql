-- starlette-jobs 0012: bulk actions, one row each (docs/dashboard.md, "Bulk actions").

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
    upper_id    bigint      NOT NULL
);
