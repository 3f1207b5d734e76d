-- starlette-jobs 0017: neither a claim nor a success writes an event row of its own: the job
-- row tells them (docs/events.md, "Why the history cannot disagree with the job").

-- The attempt an event ends, if it ends one: when it was claimed, and the attempt count the
-- claim left. An attempt's `claimed` event is read from here once it has ended otherwise than
-- by a success; from the job row while it runs, and once the job has succeeded (as `enqueued`
-- is read from the job row). Events written before this migration keep their `claimed` and
-- `succeeded` rows, and these stay NULL.
ALTER TABLE starlette_jobs_events
    ADD COLUMN claimed_at      timestamptz,
    ADD COLUMN claimed_attempt integer;
