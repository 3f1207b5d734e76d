-- starlette-jobs 0017: a claim writes no event row of its own (docs/events.md, "Where a claim
-- is kept").

-- The attempt an event ends, if it ends one: when it was claimed, and the attempt count the
-- claim left. The `claimed` event is read from here once the attempt has ended, and from the
-- job row while it runs, as `enqueued` is read from the job row: a claim then writes the job
-- row alone, one row and one index entry fewer per attempt than an event row of its own.
-- Events written before this migration keep their `claimed` rows, and these stay NULL.
ALTER TABLE starlette_jobs_events
    ADD COLUMN claimed_at      timestamptz,
    ADD COLUMN claimed_attempt integer;
