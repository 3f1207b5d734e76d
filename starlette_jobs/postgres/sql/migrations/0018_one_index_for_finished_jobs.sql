-- starlette-jobs 0018: one index entry fewer for every job that finishes
-- (docs/performance.md, "One index for the finished jobs").

-- A finished job had an entry in two indexes: finished_idx (finished_at, for retention and the
-- job list's time bound) and status_idx (status, queue, for counts per status). One index on
-- (status, queue, finished_at) serves all three: the counts read its first two columns as they
-- read status_idx, and retention and the time bound read the finished_at ranges of each status
-- and queue in turn (prune_finished, finished_since). A job's success then writes one entry
-- less: 2 to 5 us of the server's CPU a job in measured drains.
CREATE INDEX starlette_jobs_finished_status_idx
    ON starlette_jobs (status, queue, finished_at)
    WHERE status IN ('waiting', 'succeeded', 'failed', 'cancelled');
DROP INDEX starlette_jobs_finished_idx;
DROP INDEX starlette_jobs_status_idx;
ALTER INDEX starlette_jobs_finished_status_idx RENAME TO starlette_jobs_status_idx;
