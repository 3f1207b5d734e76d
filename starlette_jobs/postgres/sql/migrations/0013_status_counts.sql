-- starlette-jobs 0013: an index for counts per status that do not grow with the table
-- (jobs.status_counts: the dashboard's overview and `starlette-jobs status`, docs/dashboard.md).

-- Pending and running jobs are counted through claim_idx and lease_idx; this one serves the
-- other statuses: the waiting steps, counted exactly, and each finished status, counted up to a
-- cap (a LIMIT-ed read of the (status, queue) entries). Kept small by B-tree deduplication (one
-- posting list per status and queue). It costs one more index entry per job that finishes (and
-- per waiting step), written by the statement that already writes the row and finished_idx.
CREATE INDEX starlette_jobs_status_idx
    ON starlette_jobs (status, queue)
    WHERE status IN ('waiting', 'succeeded', 'failed', 'cancelled');
