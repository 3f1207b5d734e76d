-- starlette-jobs 0014: a bulk action's time bound (docs/dashboard.md, "Bulk actions").

-- Only the jobs that finished at or after this time ("the failed jobs of the last hour"),
-- resolved once when the action begins, so a run on after a stop applies the same bound.
ALTER TABLE starlette_jobs_bulk_actions ADD COLUMN finished_after timestamptz;

-- Finished bulk records are pruned with the jobs' retention (worker/_retention.py): their age
-- is read from here.
CREATE INDEX starlette_jobs_bulk_finished_idx
    ON starlette_jobs_bulk_actions (finished_at)
    WHERE finished_at IS NOT NULL;
