-- starlette-jobs 0004: idempotency keys, which hold for as long as the job is kept.

-- A unique key holds only while its job is pending or running; an idempotency key holds until
-- the job is pruned (see `retention`), so that a request retried after its job finished gets
-- that job back instead of running it again. It is scoped by job name: one key may name a job
-- of each name.
ALTER TABLE starlette_jobs ADD COLUMN idempotency_key text;

CREATE UNIQUE INDEX starlette_jobs_idempotency_key_idx
    ON starlette_jobs (name, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
