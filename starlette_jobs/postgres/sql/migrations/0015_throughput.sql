-- starlette-jobs 0015: the attempts the workers ended, per queue and minute (jobs.throughput,
-- the dashboard's overview; docs/dashboard.md, "Throughput").

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
