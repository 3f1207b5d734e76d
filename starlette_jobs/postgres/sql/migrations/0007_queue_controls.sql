-- starlette-jobs 0007: queue controls, one row per queue (docs/limits.md).

-- Whether the queue is paused (`jobs.pause`), and the limits its workers declared in
-- `Jobs(queues=...)`, written by each worker as it starts (the last one wins). A queue with no
-- row is neither paused nor limited. The claim of a limited queue locks its row: the claimers
-- of that queue take turns, and each counts the jobs the others claimed.
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
