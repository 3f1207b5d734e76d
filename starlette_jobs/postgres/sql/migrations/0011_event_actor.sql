-- starlette-jobs 0011: who asked for an operator's change, in the job's events (docs/events.md).

-- The name given to `jobs.retry/cancel/release(..., by=...)`: the dashboard's user (what its
-- authorize hook answered), the CLI's `--by` or the OS user. NULL for the changes the library
-- makes on its own (claims, outcomes, rescues) and for calls that named no one. A nullable
-- column with no default: adding it rewrites nothing.
ALTER TABLE starlette_jobs_events ADD COLUMN actor text;
