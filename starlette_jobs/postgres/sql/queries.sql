-- Every statement starlette-jobs runs, one per `-- name:` block, loaded once by postgres/_migrations.py.
-- Parameters are always bound ($1, $2, ...), never formatted into the text.
-- The enqueue statements may run in the caller's transaction (`connection=`), where `now()` is
-- when that transaction began, perhaps long ago: they read the clock with
-- `statement_timestamp()`, so that `created_at` is the enqueue and a delay counts from it. The
-- worker's statements run on their own, where the two are the same.
-- Rows about to be updated are locked FOR NO KEY UPDATE, the strength of the UPDATE itself:
-- FOR UPDATE would also conflict with the FOR KEY SHARE lock that an insert into an
-- application's table with a foreign key to a job takes, and a lease renewal would skip a
-- healthy job for as long as that transaction lasts.

-- name: lock_migrations
-- Serializes migrations across processes for the rest of the transaction.
-- $1: the advisory lock key
SELECT pg_advisory_xact_lock($1);

-- name: schema_exists
-- Whether the schema of `Jobs(schema=...)` exists.
-- $1: the schema's name
SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1);

-- name: current_schema
-- The schema a caller's connection puts tables in (its search_path's first existing schema).
SELECT current_schema();

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS starlette_jobs_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: applied_migrations
SELECT version FROM starlette_jobs_migrations ORDER BY version;

-- name: record_migration
-- $1: version number, $2: file name
INSERT INTO starlette_jobs_migrations (version, name) VALUES ($1, $2);

-- name: insert_job_now
-- One job without a unique key, due now (the common enqueue): `insert_job` without the
-- expressions for a delay and a conditional NOTIFY, which cost the server a few percent of
-- the whole statement. Returns its id.
-- $1 name, $2 queue, $3 payload (JSON text), $4 priority, $5 max_attempts,
-- $6 trace context (JSON text) or NULL
INSERT INTO starlette_jobs (name, queue, payload, priority, max_attempts, trace_context,
                            created_at, run_at)
VALUES ($1, $2, $3::jsonb, $4, $5, $6::jsonb, statement_timestamp(), statement_timestamp())
RETURNING id, pg_notify('starlette_jobs:' || $2, '') AS notified;

-- name: insert_job
-- One job without a unique key; returns its id.
-- $1 name, $2 queue, $3 payload (JSON text), $4 priority, $5 delay in seconds or NULL,
-- $6 run_at or NULL, $7 max_attempts, $8 trace context (JSON text) or NULL,
-- $9 whether to NOTIFY the queue's channel (false for delayed jobs)
INSERT INTO starlette_jobs (name, queue, payload, priority, run_at, max_attempts, trace_context,
                            created_at)
VALUES ($1, $2, $3::jsonb, $4,
        coalesce($6, statement_timestamp() + make_interval(secs => coalesce($5::float8, 0))),
        $7, $8::jsonb, statement_timestamp())
RETURNING id, CASE WHEN $9::boolean THEN pg_notify('starlette_jobs:' || $2, '') END AS notified;

-- name: insert_unique_job
-- One job with a unique key, an idempotency key, or both; returns its id. With a unique key
-- that a live job already holds, or an idempotency key that a job of this name holds (in any
-- status; that holder first), returns that job's id instead and writes nothing, and
-- `arguments_differ`: whether it holds the idempotency key with another payload than $3 (as
-- jsonb compares them: key order and spacing aside). A unique key's holder never differs.
-- $1 name, $2 queue, $3 payload (JSON text), $4 priority, $5 delay in seconds or NULL,
-- $6 run_at or NULL, $7 max_attempts, $8 trace context (JSON text) or NULL, $9 unique key or NULL,
-- $10 whether to NOTIFY the queue's channel (false for delayed jobs), $11 idempotency key or NULL
WITH inserted AS (
    INSERT INTO starlette_jobs
        (name, queue, payload, priority, run_at, max_attempts, trace_context, unique_key,
         idempotency_key, created_at)
    VALUES ($1, $2, $3::jsonb, $4,
            coalesce($6, statement_timestamp() + make_interval(secs => coalesce($5::float8, 0))),
            $7, $8::jsonb, $9, $11, statement_timestamp())
    -- Whichever key is taken (no conflict target: any unique index).
    ON CONFLICT DO NOTHING
    RETURNING id
)
SELECT id, CASE WHEN $10::boolean THEN pg_notify('starlette_jobs:' || $2, '') END AS notified,
       false AS arguments_differ
  FROM inserted
UNION ALL
(SELECT id, NULL, coalesce(name = $1 AND idempotency_key = $11 AND payload <> $3::jsonb, false)
   FROM starlette_jobs
  WHERE NOT EXISTS (SELECT FROM inserted)
    AND (($11::text IS NOT NULL AND name = $1 AND idempotency_key = $11)
         OR ($9::text IS NOT NULL AND unique_key = $9 AND status IN ('pending', 'running')))
  ORDER BY coalesce(name = $1 AND idempotency_key = $11, false) DESC
  LIMIT 1);

-- name: reserve_job_ids
-- Ids for jobs to be written later (`insert_reserved_jobs`: the on-success enqueue of a
-- request), taken from the id column's identity; an id never written leaves a harmless gap.
-- With a key that a job already holds (as `insert_unique_job` decides), that job's id alone,
-- `held`, and `arguments_differ` (as `insert_unique_job` has it), and no id taken.
-- $1 how many ids, $2 job name, $3 unique key or NULL, $4 idempotency key or NULL,
-- $5 the payload (JSON text) of the job with the idempotency key, or NULL
WITH holder AS (
    SELECT id, coalesce(name = $2 AND idempotency_key = $4 AND payload <> $5::jsonb, false)
               AS arguments_differ
      FROM starlette_jobs
     WHERE ($4::text IS NOT NULL AND name = $2 AND idempotency_key = $4)
        OR ($3::text IS NOT NULL AND unique_key = $3 AND status IN ('pending', 'running'))
     ORDER BY coalesce(name = $2 AND idempotency_key = $4, false) DESC
     LIMIT 1
)
SELECT id, true AS held, arguments_differ FROM holder
UNION ALL
SELECT nextval(pg_get_serial_sequence('starlette_jobs', 'id')), false, false
  FROM generate_series(1, $1::int4)
 WHERE NOT EXISTS (SELECT FROM holder);

-- name: insert_reserved_jobs
-- Jobs whose ids `reserve_job_ids` gave, of any names, in one statement; one whose unique or
-- idempotency key was taken meanwhile is not written (the caller then rolls back the rest).
-- Returns the ids written, and wakes the queues of those due now.
-- $1 ids, $2 names, $3 queues, $4 payloads (one JSON array, an element per job), $5 priorities,
-- $6 delays in seconds (NULL elements: none), $7 run_at (NULL elements: none),
-- $8 max_attempts, $9 trace contexts (JSON text or NULL), $10 unique keys (or NULL),
-- $11 idempotency keys (or NULL), $12 whether to NOTIFY, per job
WITH given AS (
    SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $5::int4[], $6::float8[],
                         $7::timestamptz[], $8::int4[], $9::text[], $10::text[], $11::text[],
                         $12::boolean[])
           WITH ORDINALITY AS given(id, name, queue, priority, delay, run_at, max_attempts,
                                    trace_context, unique_key, idempotency_key, notify,
                                    position)
), inserted AS (
    INSERT INTO starlette_jobs
        (id, name, queue, payload, priority, run_at, max_attempts, trace_context, unique_key,
         idempotency_key, created_at)
    OVERRIDING SYSTEM VALUE
    SELECT id, name, queue, $4::jsonb -> (position - 1)::int, priority,
           coalesce(run_at, statement_timestamp() + make_interval(secs => coalesce(delay, 0))),
           max_attempts, trace_context::jsonb, unique_key, idempotency_key, statement_timestamp()
      FROM given
     ORDER BY position
    ON CONFLICT DO NOTHING
    RETURNING id, queue
), woken AS (
    SELECT DISTINCT inserted.queue FROM inserted JOIN given USING (id) WHERE given.notify
), notified AS (
    SELECT pg_notify('starlette_jobs:' || queue, '') FROM woken
)
SELECT id FROM inserted, (SELECT count(*) FROM notified) AS sent ORDER BY id;

-- name: insert_jobs
-- Many jobs of one name in one statement, one NOTIFY for all; returns their ids in order.
-- $1 name, $2 queue, $3 payloads (one JSON array, an element per job: the server parses one
-- text instead of one per row), $4 priority, $5 delay in seconds or NULL, $6 run_at or NULL,
-- $7 max_attempts, $8 trace context (JSON text) or NULL, $9 whether to NOTIFY
WITH inserted AS (
    INSERT INTO starlette_jobs (name, queue, payload, priority, run_at, max_attempts,
                                trace_context, created_at)
    SELECT $1, $2, payload, $4,
           coalesce($6, statement_timestamp() + make_interval(secs => coalesce($5::float8, 0))),
           $7, $8::jsonb, statement_timestamp()
      FROM jsonb_array_elements($3::jsonb) WITH ORDINALITY AS given(payload, position)
     ORDER BY position
    RETURNING id
)
SELECT array_agg(id ORDER BY id) AS ids,
       CASE WHEN $9::boolean THEN pg_notify('starlette_jobs:' || $2, '') END AS notified
  FROM inserted;

-- name: claim_batch
-- Takes up to $2 due pending jobs of one queue for this worker, skipping rows another worker
-- is claiming at the same moment, and leases them. The ids go to the UPDATE as one array, so
-- that the plan is the same whatever $2 is: the claim connection reuses one generic plan
-- instead of planning every claim (see postgres/_connected.py). A new attempt starts with no progress.
-- Only jobs whose name the worker knows (deploy-aware claiming, docs/workers.md): a job only a
-- newer worker declares waits for one. The name is not in the index: it is checked on the row
-- the claim reads anyway.
-- It writes no event: the `claimed` event is read from the job row while the attempt runs, and
-- afterwards from the event that ends it, or from the row again once the job has succeeded
-- (job_events; docs/events.md).
-- $1 queue, $2 how many at most, $3 worker id, $4 lease duration in seconds,
-- $5 the job names the worker knows (NULL: any name)
WITH picked AS (
    SELECT id FROM starlette_jobs
     WHERE queue = $1 AND status = 'pending' AND run_at <= now()
       AND ($5::text[] IS NULL OR name = ANY($5::text[]))
     ORDER BY priority DESC, run_at, id
     LIMIT $2
       FOR NO KEY UPDATE SKIP LOCKED
), claimed AS (
    UPDATE starlette_jobs AS job
       SET status = 'running',
           -- Kept within the column: a count an operator set to the largest integer would
           -- otherwise fail the claim of the whole batch, every time ("integer out of range").
           attempts = least(job.attempts, 2147483646) + 1,
           worker_id = $3,
           -- Unique to the attempt: 60 random bits drawn once per statement, then the job's id.
           -- A gen_random_uuid() per row costs the server 0.7 us a job (a tenth of the claim);
           -- jobs differ by their id, and a job's attempts by the random half. The random half
           -- is cut once, in the subquery, and the id written as 16 hex digits by int8send:
           -- 0.27 us a row instead of 0.6 for left() and lpad(to_hex()) on each row.
           lease_token = ((SELECT left(gen_random_uuid()::text, 19))
                          || encode(int8send(job.id), 'hex'))::uuid,
           lease_expires_at = now() + make_interval(secs => $4),
           started_at = now(),
           progress = NULL
     WHERE job.id = ANY(ARRAY(SELECT id FROM picked))
    -- In the order of `Claim`'s fields: the store builds each by position.
    RETURNING job.id, job.name, job.queue, job.payload::text AS payload, job.attempts,
              job.max_attempts, job.lease_token, job.trace_context::text AS trace_context,
              job.scheduled_for, job.workflow_id
)
SELECT * FROM claimed;

-- fragment: release_steps
-- Workflows (docs/workflows.md): `locked` and `released`, the end of every statement that tells
-- waiting steps of finished ones (record_outcomes, settle_steps), from a CTE `told` of
-- (id of a waiting step, how many of its upstream steps finished, how many of those did not
-- succeed, and those as text, in id order: `causes`). Written once: the exactly-once release
-- is this text.
locked AS (
    -- In id order: two statements releasing steps of one workflow cannot deadlock. Whatever
    -- their status in this statement's snapshot, and read as the lock leaves them: a step
    -- cancelled there may be waiting again by now, put back by a retry of the step that failed
    -- (`reopen_steps`) that counted this statement's steps as unfinished, since it committed
    -- first; a lock taken on the status of the snapshot alone would pass it by, and it would
    -- wait for ever. The other way round, the retry waits for this lock, and counts after it.
    SELECT job.id, job.status FROM starlette_jobs AS job
     WHERE job.id = ANY(ARRAY(SELECT id FROM told))
     ORDER BY job.id
       FOR NO KEY UPDATE
), released AS (
    -- On the row locked, as the last statement to change it left it: of two steps finishing
    -- at once, the one that brings the count to zero releases (or cancels) the step, once.
    -- Past its allowed failures a step is cancelled at once, naming the cause: of the steps
    -- this statement tells it failed, in id order, the one past the failures it allows, and
    -- the count then (the memory store tells a batch's outcomes one by one in id order: the
    -- same step, the same count).
    UPDATE starlette_jobs AS job
       SET upstream_left = job.upstream_left - told.finished,
           upstream_failed = job.upstream_failed + told.failed,
           status = CASE WHEN job.upstream_failed + told.failed > job.allowed_failures
                         THEN 'cancelled'
                         WHEN job.upstream_left = told.finished THEN 'pending'
                         ELSE 'waiting' END,
           run_at = CASE WHEN job.upstream_failed + told.failed <= job.allowed_failures
                              AND job.upstream_left = told.finished THEN now()
                         ELSE job.run_at END,
           finished_at = CASE WHEN job.upstream_failed + told.failed > job.allowed_failures
                              THEN now() END,
           last_error = CASE WHEN job.upstream_failed + told.failed > job.allowed_failures
                             THEN CASE WHEN job.allowed_failures = 0
                                       THEN 'cancelled: it waits for ' || told.causes[
                                                1 - job.upstream_failed]
                                       ELSE 'cancelled: ' || (job.allowed_failures + 1)
                                            || ' of the ' || cardinality(job.upstream)
                                            || ' steps it waits for did not succeed, at most '
                                            || job.allowed_failures || ' may (latest: '
                                            || told.causes[job.allowed_failures
                                                           - job.upstream_failed + 1]
                                            || ')' END
                             ELSE job.last_error END
      FROM told JOIN locked USING (id)
     -- The status as locked, not the snapshot's (above); the row updated is the one locked.
     WHERE job.id = told.id AND locked.status = 'waiting'
    RETURNING job.id, job.queue, job.status, job.attempts, job.run_at, job.last_error,
              job.dependents, job.outcome_wanted
)

-- name: record_outcomes
-- Ends many attempts at once. Each row is written only while it still holds the lease token it
-- was claimed with: a worker that lost its lease cannot overwrite a newer attempt. A job asked
-- to stop is not retried: it ends cancelled. Whoever waits for a finished job is told.
-- Returns the ids that were written.
-- $1 ids, $2 lease tokens, $3 new statuses ('succeeded', 'failed', 'cancelled', or 'pending'
-- for a retry), $4 seconds until the retry (NULL unless pending), $5 error texts (NULL on
-- success), $6 results (JSON text or NULL), $7 last progress (JSON text, or NULL: unchanged),
-- $8 whether to record events
WITH outcome AS (
    SELECT * FROM unnest($1::bigint[], $2::uuid[], $3::text[], $4::float8[], $5::text[],
                         $6::text[], $7::text[])
        AS outcome(id, lease_token, status, retry_delay, error, result, progress)
), written AS (
    UPDATE starlette_jobs AS job
       SET status = CASE WHEN outcome.status = 'pending' AND job.cancel_requested_at IS NOT NULL
                         THEN 'cancelled' ELSE outcome.status END,
           run_at = CASE WHEN outcome.status = 'pending' AND job.cancel_requested_at IS NULL
                         THEN now() + make_interval(secs => outcome.retry_delay)
                         ELSE job.run_at END,
           finished_at = CASE WHEN outcome.status = 'pending' AND job.cancel_requested_at IS NULL
                              THEN NULL ELSE now() END,
           -- A job that succeeded has no error to show; `errors` keeps the failed attempts'.
           last_error = CASE WHEN outcome.status = 'succeeded' THEN NULL
                             ELSE coalesce(outcome.error, job.last_error) END,
           -- The latest 100 attempts' errors are kept (MAX_KEPT_ERRORS in _storable.py). Not
           -- an array (an operator's edit): started afresh, not failing the whole batch.
           errors = CASE WHEN outcome.error IS NULL THEN job.errors
                         ELSE CASE WHEN jsonb_typeof(job.errors) <> 'array' THEN '[]'::jsonb
                                   WHEN jsonb_array_length(job.errors) >= 100
                                   THEN job.errors - 0 ELSE job.errors END
                              || jsonb_build_array(jsonb_build_object(
                             'attempt', job.attempts, 'error', outcome.error,
                             'at', now(), 'worker_id', job.worker_id)) END,
           result = outcome.result::jsonb,
           progress = coalesce(outcome.progress::jsonb, job.progress),
           lease_token = NULL,
           lease_expires_at = NULL,
           -- A workflow's step that finished tells the steps that wait for it below (`told`).
           settled = job.dependents IS NOT NULL
                     AND (outcome.status <> 'pending' OR job.cancel_requested_at IS NOT NULL)
      FROM outcome
     WHERE job.id = outcome.id AND job.lease_token = outcome.lease_token
    RETURNING job.id, job.status, job.attempts, job.worker_id, outcome.error, job.run_at,
              job.outcome_wanted, job.step, job.dependents, job.started_at
), logged AS (
    -- With the claim of the attempt it ends (`claimed_at`: the claim wrote no event). A success
    -- writes none: it is read from the job row, which nothing changes after it (job_events).
    INSERT INTO starlette_jobs_events (job_id, kind, status, attempt, worker_id, error, run_at,
                                       claimed_at, claimed_attempt)
    SELECT id, CASE WHEN status = 'pending' THEN 'attempt_failed' ELSE status END, status,
           attempts, worker_id, error, CASE WHEN status = 'pending' THEN run_at END,
           started_at, attempts
      FROM written WHERE $8::boolean AND status <> 'succeeded'
), told AS (
    -- Workflows (docs/workflows.md): the steps that wait for those just finished, how many of
    -- theirs finished, how many of those otherwise than succeeded, and those (the causes of a
    -- cancellation). Nothing for a job of no workflow (its dependents are NULL).
    SELECT dependent AS id, count(*) AS finished,
           count(*) FILTER (WHERE written.status <> 'succeeded') AS failed,
           array_agg('step ' || written.step || ' (job ' || written.id || ') '
                     || written.status ORDER BY written.id)
               FILTER (WHERE written.status <> 'succeeded') AS causes
      FROM written, unnest(written.dependents) AS dependent
     WHERE written.status <> 'pending'
     GROUP BY dependent
),
-- include: release_steps
, released_logged AS (
    INSERT INTO starlette_jobs_events (job_id, kind, status, attempt, error, run_at)
    SELECT id, CASE WHEN status = 'pending' THEN 'ready' ELSE 'cancelled' END, status, attempts,
           CASE WHEN status = 'cancelled' THEN last_error END,
           CASE WHEN status = 'pending' THEN run_at END
      FROM released WHERE status <> 'waiting' AND $8::boolean
), announced AS (
    SELECT pg_notify('starlette_jobs.outcomes', id::text) FROM written
     WHERE outcome_wanted AND status <> 'pending'
     UNION ALL
    SELECT pg_notify('starlette_jobs.outcomes', id::text) FROM released
     WHERE outcome_wanted AND status = 'cancelled'
     UNION ALL
    SELECT pg_notify('starlette_jobs:' || queue, '')
      FROM (SELECT DISTINCT queue FROM released WHERE status = 'pending') AS q
)
-- `cascade`: steps it cancelled have dependents of their own, which `settle_steps` tells next.
SELECT id, (SELECT count(*) FROM released
             WHERE status = 'cancelled' AND dependents IS NOT NULL) > 0 AS cascade
  FROM written, (SELECT count(*) FROM announced) AS sent;

-- name: record_successes
-- `record_outcomes` for a batch in which every attempt succeeded and left no progress to write:
-- nearly every batch of a busy worker. What `record_outcomes` does for such an outcome, without
-- the arrays and expressions that only failures, retries and progress need: those cost the
-- client their encoding and the server a fifth of the statement.
-- $1 ids, $2 lease tokens, $3 results (JSON text or NULL), $4 whether to record events
WITH written AS (
    UPDATE starlette_jobs AS job
       SET status = 'succeeded',
           finished_at = now(),
           last_error = NULL,
           result = outcome.result::jsonb,
           lease_token = NULL,
           lease_expires_at = NULL,
           -- A workflow's step tells the steps that wait for it below (`told`).
           settled = job.dependents IS NOT NULL
      FROM unnest($1::bigint[], $2::uuid[], $3::text[]) AS outcome(id, lease_token, result)
     WHERE job.id = outcome.id AND job.lease_token = outcome.lease_token
    -- No event: a success, and its attempt's claim, are read from the job row (job_events).
    RETURNING job.id, job.outcome_wanted, job.dependents
), announced AS (
    SELECT pg_notify('starlette_jobs.outcomes', id::text) FROM written WHERE outcome_wanted
), told AS (
    -- Workflows (docs/workflows.md): the steps that wait for those just finished, and how
    -- many of theirs finished. Nothing for a job of no workflow (its dependents are NULL).
    SELECT dependent AS id, count(*) AS finished
      FROM written, unnest(written.dependents) AS dependent
     GROUP BY dependent
), locked AS (
    -- In id order, whatever their status in this statement's snapshot, and read as the lock
    -- leaves them: see `release_steps`.
    SELECT job.id, job.status FROM starlette_jobs AS job
     WHERE job.id = ANY(ARRAY(SELECT id FROM told))
     ORDER BY job.id
       FOR NO KEY UPDATE
), released AS (
    -- On the row locked, as the last statement to change it left it: of two steps finishing
    -- at once, the one that brings the count to zero releases the step, once.
    UPDATE starlette_jobs AS job
       SET upstream_left = job.upstream_left - told.finished,
           status = CASE WHEN job.upstream_left = told.finished THEN 'pending' ELSE 'waiting' END,
           run_at = CASE WHEN job.upstream_left = told.finished THEN now() ELSE job.run_at END
      FROM told JOIN locked USING (id)
     -- The status as locked, not the snapshot's (above); the row updated is the one locked.
     WHERE job.id = told.id AND locked.status = 'waiting'
    RETURNING job.id, job.queue, job.status, job.attempts, job.run_at
), released_logged AS (
    INSERT INTO starlette_jobs_events (job_id, kind, status, attempt, run_at)
    SELECT id, 'ready', status, attempts, run_at FROM released
     WHERE status = 'pending' AND $4::boolean
), woken AS (
    SELECT pg_notify('starlette_jobs:' || queue, '')
      FROM (SELECT DISTINCT queue FROM released WHERE status = 'pending') AS q
)
SELECT id FROM written, (SELECT count(*) FROM announced) AS sent,
       (SELECT count(*) FROM woken) AS woke;

-- name: record_plain_successes
-- `record_successes` for a batch in which no job is a workflow's step (their claims said so:
-- a job's workflow_id is set once, at its insert, and only a step gains dependents): the same
-- writes without the part that tells waiting steps. That part's CTEs, empty for such a batch,
-- still cost the server ~55 us a statement to set up and run (5 us a job in batches of 10;
-- docs/performance.md). `settled` is left as it is: were a step ever written here, the
-- upkeep's settle_steps would still find it finished and unsettled, and tell its dependents.
-- No event: a success, and its attempt's claim, are read from the job row (job_events).
-- $1 ids, $2 lease tokens, $3 results (JSON text or NULL)
WITH written AS (
    UPDATE starlette_jobs AS job
       SET status = 'succeeded',
           finished_at = now(),
           last_error = NULL,
           result = outcome.result::jsonb,
           lease_token = NULL,
           lease_expires_at = NULL
      FROM unnest($1::bigint[], $2::uuid[], $3::text[]) AS outcome(id, lease_token, result)
     WHERE job.id = outcome.id AND job.lease_token = outcome.lease_token
    RETURNING job.id, job.outcome_wanted
)
-- Whoever waits for one of these jobs (`jobs.wait`) is told by the NOTIFY in the rows returned:
-- every row is sent, so each is evaluated. A CTE of its own would read `written` once more.
SELECT id, CASE WHEN outcome_wanted THEN pg_notify('starlette_jobs.outcomes', id::text) END
  FROM written;

-- name: locked_jobs
-- Of these jobs, those whose outcome would wait for a row another transaction holds locked now
-- (an operator's SELECT ... FOR UPDATE in an open transaction, say): the job's own row, or the
-- row of a step waiting for it, which its outcome statement tells of the finish. Asked after an
-- outcome write ran out of time, so that the others are written without them. It waits for no
-- lock (SKIP LOCKED), and holds those it takes for this statement only. A foreign key's FOR KEY
-- SHARE does not count: it does not hold up the outcome's update either.
-- $1 ids
WITH touched AS (
    SELECT job.id AS asked, touched.id
      FROM starlette_jobs AS job,
           unnest(array_prepend(job.id, coalesce(job.dependents, '{}'))) AS touched(id)
     WHERE job.id = ANY($1::bigint[])
), free AS (
    SELECT id FROM starlette_jobs WHERE id IN (SELECT id FROM touched)
       FOR NO KEY UPDATE SKIP LOCKED
)
SELECT DISTINCT touched.asked AS id
  FROM touched JOIN starlette_jobs AS job USING (id)
 WHERE touched.id NOT IN (SELECT id FROM free);

-- name: complete_job
-- A job's own success, written in the job's transaction (`current_job().complete_in`,
-- docs/transactions.md): what record_outcomes writes for a success (the row, its event, the
-- release of the steps waiting for it, the NOTIFYs, sent at commit), for one attempt, fenced
-- by its lease token and by `running`: a rescued, released or already completed attempt
-- matches nothing, and the caller raises so that its transaction fails. Returns the id, or
-- no row.
-- $1 job id, $2 lease token, $3 result (JSON text or NULL), $4 whether to record events
WITH written AS (
    UPDATE starlette_jobs AS job
       SET status = 'succeeded',
           finished_at = now(),
           last_error = NULL,
           result = $3::jsonb,
           lease_token = NULL,
           lease_expires_at = NULL,
           -- A workflow's step tells the steps that wait for it below (`told`).
           settled = job.dependents IS NOT NULL
     WHERE job.id = $1 AND job.lease_token = $2 AND job.status = 'running'
    -- No event: a success, and its attempt's claim, are read from the job row (job_events).
    RETURNING job.id, job.outcome_wanted, job.dependents
), told AS (
    -- As in record_outcomes, for a success: nothing failed, nothing to name as a cause.
    SELECT dependent AS id, count(*) AS finished, 0::bigint AS failed, NULL::text[] AS causes
      FROM written, unnest(written.dependents) AS dependent
     GROUP BY dependent
),
-- include: release_steps
, released_logged AS (
    INSERT INTO starlette_jobs_events (job_id, kind, status, attempt, error, run_at)
    SELECT id, CASE WHEN status = 'pending' THEN 'ready' ELSE 'cancelled' END, status, attempts,
           CASE WHEN status = 'cancelled' THEN last_error END,
           CASE WHEN status = 'pending' THEN run_at END
      FROM released WHERE status <> 'waiting' AND $4::boolean
), announced AS (
    SELECT pg_notify('starlette_jobs.outcomes', id::text) FROM written WHERE outcome_wanted
     UNION ALL
    SELECT pg_notify('starlette_jobs.outcomes', id::text) FROM released
     WHERE outcome_wanted AND status = 'cancelled'
     UNION ALL
    SELECT pg_notify('starlette_jobs:' || queue, '')
      FROM (SELECT DISTINCT queue FROM released WHERE status = 'pending') AS q
)
SELECT id FROM written, (SELECT count(*) FROM announced) AS sent;

-- name: extend_leases
-- Heartbeat for jobs this worker still runs. It never waits on a row lock: a row another
-- transaction holds (an operator's SELECT ... FOR UPDATE, a rescue in flight) is skipped this
-- round. Returns each token that still holds its job, as the statement's snapshot shows it,
-- whether its lease was renewed, and whether the job was asked to stop (should that request's
-- NOTIFY have been lost); a token left out has lost its job.
-- $1 ids, $2 lease tokens, $3 lease duration in seconds
WITH held AS (
    SELECT * FROM unnest($1::bigint[], $2::uuid[]) AS held(id, lease_token)
), lockable AS (
    SELECT job.id FROM starlette_jobs AS job
      JOIN held ON job.id = held.id AND job.lease_token = held.lease_token
       FOR NO KEY UPDATE OF job SKIP LOCKED
), renewed AS (
    UPDATE starlette_jobs AS job
       SET lease_expires_at = now() + make_interval(secs => $3)
      FROM lockable
     WHERE job.id = lockable.id
    RETURNING job.lease_token
)
SELECT held.lease_token, held.lease_token IN (SELECT lease_token FROM renewed) AS renewed,
       job.cancel_requested_at IS NOT NULL AS cancel_requested
  FROM held
  JOIN starlette_jobs AS job ON job.id = held.id AND job.lease_token = held.lease_token;

-- name: release_jobs
-- Gives leased jobs back without using up an attempt (shutdown); a job asked to stop ends
-- cancelled instead. The queues of the jobs given back are woken: the worker releasing them
-- is stopping, and the others would find them only at their next poll. Returns the ids
-- released.
-- A row another transaction holds locked (an operator's) is left, and not waited for: the
-- others are given back at once, that one once its lease expires.
-- $1 ids, $2 lease tokens, $3 whether to record events
WITH free AS (
    SELECT id FROM starlette_jobs WHERE id = ANY($1::bigint[]) FOR NO KEY UPDATE SKIP LOCKED
), released AS (
    UPDATE starlette_jobs AS job
       SET status = CASE WHEN job.cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,
           finished_at = CASE WHEN job.cancel_requested_at IS NULL THEN NULL ELSE now() END,
           attempts = greatest(job.attempts - 1, 0),
           run_at = now(),
           lease_token = NULL,
           lease_expires_at = NULL
      FROM unnest($1::bigint[], $2::uuid[]) AS held(id, lease_token)
     WHERE job.id = held.id AND job.lease_token = held.lease_token
       AND job.id IN (SELECT id FROM free)
    RETURNING job.*
), logged AS (
    -- With the claim of the attempt it ends (the claim counted one attempt more).
    INSERT INTO starlette_jobs_events (job_id, kind, status, attempt, worker_id, run_at,
                                       claimed_at, claimed_attempt)
    SELECT id, CASE WHEN status = 'pending' THEN 'released' ELSE status END, status, attempts,
           worker_id, CASE WHEN status = 'pending' THEN run_at END, started_at, attempts + 1
      FROM released WHERE $3::boolean
), notified AS (
    SELECT pg_notify('starlette_jobs:' || queue, '')
      FROM (SELECT DISTINCT queue FROM released WHERE status = 'pending') q
     UNION ALL
    SELECT pg_notify('starlette_jobs.outcomes', id::text) FROM released
     WHERE outcome_wanted AND status <> 'pending'
)
-- `owed`: a step it cancelled has steps waiting for it (`settle_steps`).
SELECT id, status = 'cancelled' AND dependents IS NOT NULL AS owed
  FROM released, (SELECT count(*) FROM notified) AS sent;

-- name: release_unknown_claims
-- Running jobs of one queue that this worker holds under a lease token it does not know: a claim
-- committed on the server after the worker stopped waiting for its answer (the connection
-- dropped). They go back to pending with the attempt given back: they never started (a job
-- asked to stop meanwhile ends cancelled).
-- $1 queue, $2 worker id, $3 the lease tokens the worker knows, $4 whether to record events
WITH released AS (
    UPDATE starlette_jobs
       SET status = CASE WHEN cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,
           finished_at = CASE WHEN cancel_requested_at IS NULL THEN NULL ELSE now() END,
           attempts = greatest(attempts - 1, 0), run_at = now(),
           lease_token = NULL, lease_expires_at = NULL
     WHERE queue = $1 AND worker_id = $2 AND status = 'running'
       AND lease_token <> ALL($3::uuid[])
    RETURNING *
), logged AS (
    -- With the claim of the attempt it ends (the claim counted one attempt more).
    INSERT INTO starlette_jobs_events (job_id, kind, status, attempt, worker_id, run_at,
                                       claimed_at, claimed_attempt)
    SELECT id, CASE WHEN status = 'pending' THEN 'released' ELSE status END, status, attempts,
           worker_id, CASE WHEN status = 'pending' THEN run_at END, started_at, attempts + 1
      FROM released WHERE $4::boolean
), announced AS (
    SELECT pg_notify('starlette_jobs.outcomes', id::text) FROM released
     WHERE outcome_wanted AND status <> 'pending'
)
-- `owed`: as in release_jobs.
SELECT id, status = 'cancelled' AND dependents IS NOT NULL AS owed
  FROM released, (SELECT count(*) FROM announced) AS sent ORDER BY id;

-- name: release_job
-- An operator hands a running job back to pending, its attempt given back, whichever worker
-- holds it (a job asked to stop ends cancelled). That worker's lease is gone: its outcome will
-- be refused, and its next heartbeat cancels its copy. Returns the queue, or nothing if the job
-- was not running.
-- $1 job id, $2 whether to record events, $3 who asked (the event's actor) or NULL
WITH released AS (
    UPDATE starlette_jobs
       SET status = CASE WHEN cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,
           finished_at = CASE WHEN cancel_requested_at IS NULL THEN NULL ELSE now() END,
           attempts = greatest(attempts - 1, 0), run_at = now(),
           lease_token = NULL, lease_expires_at = NULL
     WHERE id = $1 AND status = 'running'
    RETURNING *
), logged AS (
    -- With the claim of the attempt it ends (the claim counted one attempt more).
    INSERT INTO starlette_jobs_events (job_id, kind, status, attempt, worker_id, run_at, actor,
                                       claimed_at, claimed_attempt)
    SELECT id, CASE WHEN status = 'pending' THEN 'released' ELSE status END, status, attempts,
           worker_id, CASE WHEN status = 'pending' THEN run_at END, $3::text, started_at,
           attempts + 1
      FROM released WHERE $2::boolean
)
-- `owed`: as in release_jobs.
SELECT queue,
       CASE WHEN status = 'pending' THEN pg_notify('starlette_jobs:' || queue, '')
            WHEN outcome_wanted THEN pg_notify('starlette_jobs.outcomes', id::text) END,
       status = 'cancelled' AND dependents IS NOT NULL AS owed
  FROM released;

-- name: release_worker_jobs
-- The same for every job a worker (typically a dead one) is running. Returns their ids.
-- $1 worker id, $2 whether to record events
WITH released AS (
    UPDATE starlette_jobs
       SET status = CASE WHEN cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,
           finished_at = CASE WHEN cancel_requested_at IS NULL THEN NULL ELSE now() END,
           attempts = greatest(attempts - 1, 0), run_at = now(),
           lease_token = NULL, lease_expires_at = NULL
     WHERE worker_id = $1 AND status = 'running'
    RETURNING *
), logged AS (
    -- With the claim of the attempt it ends (the claim counted one attempt more).
    INSERT INTO starlette_jobs_events (job_id, kind, status, attempt, worker_id, run_at,
                                       claimed_at, claimed_attempt)
    SELECT id, CASE WHEN status = 'pending' THEN 'released' ELSE status END, status, attempts,
           worker_id, CASE WHEN status = 'pending' THEN run_at END, started_at, attempts + 1
      FROM released WHERE $2::boolean
), notified AS (
    SELECT pg_notify('starlette_jobs:' || queue, '')
      FROM (SELECT DISTINCT queue FROM released WHERE status = 'pending') q
     UNION ALL
    SELECT pg_notify('starlette_jobs.outcomes', id::text) FROM released
     WHERE outcome_wanted AND status <> 'pending'
)
-- `owed`: as in release_jobs.
SELECT id, status = 'cancelled' AND dependents IS NOT NULL AS owed
  FROM released, (SELECT count(*) FROM notified) AS sent ORDER BY id;

-- name: prune_finished
-- Looks at the next $2 jobs that finished more than $1 seconds ago, in the order of their
-- (finished_at, id), after ($3, $4) if given; deletes those that need not be kept, and their
-- events. Returns how many it looked at and deleted, the last one it looked at (the next batch
-- starts there: `Pruned.through`), and the workflows it deleted steps of but kept (`kept`:
-- steps of theirs were left, as its snapshot saw them).
-- Bounded by what it looks at, not by what it deletes: old steps kept by the thousand (a
-- workflow that runs for days) cost each batch $2 rows at most, where a scan for $2 rows to
-- delete read past every one of them (0.5 s a batch with 350,000 of them; some 4,000,000 would
-- have taken longer than the statement timeout, and nothing would ever be pruned again).
-- The id breaks ties, which the index of finished jobs does not hold: each batch sorts the
-- jobs that finished at the cursor's instant. Jobs finish a batch at a time (tens, hundreds),
-- but one statement can finish hundreds of thousands at once (a huge workflow cancelled):
-- 400,000 took 401 batches of up to 260 ms, 41.7 s in all. Counting the jobs passed over at
-- that instant instead (an OFFSET in the index's order) took 3.3 s, but passed over jobs no
-- batch had looked at when another worker's batch deleted rows it had skipped as locked
-- (10-16% of that instant's jobs left after three workers' passes), or a kept row moved.
-- SKIP LOCKED: workers pruning at the same time share the work instead of queueing.
-- $1 retention in seconds, $2 how many to look at, $3 and $4 the last (finished_at, id)
-- looked at, or NULL
WITH looked_at AS (
    SELECT id, finished_at, workflow_id, dependents FROM starlette_jobs
     WHERE status IN ('succeeded', 'failed', 'cancelled')
       AND finished_at < now() - make_interval(secs => $1)
       AND ($3::timestamptz IS NULL OR finished_at >= $3)  -- a bound for the index
       AND ($3::timestamptz IS NULL OR (finished_at, id) > ($3, $4::int8))
     ORDER BY finished_at, id
     LIMIT $2
), old AS (
    SELECT id FROM starlette_jobs
     WHERE id = ANY(ARRAY(
               SELECT id FROM looked_at AS candidate
                -- No step of a workflow with a step to run goes (docs/workflows.md): one probe
                -- of the index of unfinished steps (starlette_jobs_unfinished_steps_idx) for
                -- each step. Not `NOT IN` the list of those workflows: past what work_mem
                -- hashes (some 350,000 of them) PostgreSQL compared every row with the whole
                -- list, and every round ran out of time.
                WHERE (candidate.workflow_id IS NULL
                       OR NOT EXISTS (SELECT FROM starlette_jobs AS unfinished
                                       WHERE unfinished.workflow_id = candidate.workflow_id
                                         AND unfinished.status IN ('pending', 'waiting', 'running')))
                  -- A workflow's step is kept while a step that waits for it is: that one reads
                  -- its result, and counts its outcome, when it runs and when it is retried
                  -- after it failed (docs/workflows.md). So a workflow goes from its last steps
                  -- up, a pass at a time.
                  AND (candidate.dependents IS NULL
                       OR NOT EXISTS (SELECT FROM starlette_jobs AS dependent
                                       WHERE dependent.id = ANY(candidate.dependents)))))
       -- Rechecked on the row locked: a job retried since this statement's snapshot stays.
       AND status IN ('succeeded', 'failed', 'cancelled')
       FOR UPDATE SKIP LOCKED
), deleted AS (
    DELETE FROM starlette_jobs AS job USING old WHERE job.id = old.id
    RETURNING job.id, job.workflow_id, job.finished_at
), forgotten AS (
    DELETE FROM starlette_jobs_events AS event USING deleted WHERE event.job_id = deleted.id
), emptied AS (
    -- A workflow's record goes with its last step. Its last steps deleted by two workers'
    -- rounds at the same moment leave it here (each sees the other's as still there): the
    -- store asks again about those kept, once this has committed (forget_empty_workflows).
    DELETE FROM starlette_jobs_workflows AS flow
     WHERE flow.id IN (SELECT workflow_id FROM deleted WHERE workflow_id IS NOT NULL)
       AND NOT EXISTS (SELECT FROM starlette_jobs AS step
                        WHERE step.workflow_id = flow.id
                          AND step.id NOT IN (SELECT id FROM deleted))
    RETURNING flow.id
)
SELECT (SELECT count(*) FROM deleted) AS deleted,
       (SELECT count(*) FROM looked_at) AS looked_at,
       last.finished_at AS last_finished_at, last.id AS last_id,
       ARRAY(SELECT DISTINCT workflow_id FROM deleted
              WHERE workflow_id IS NOT NULL AND workflow_id NOT IN (SELECT id FROM emptied))
           AS kept
  FROM (SELECT NULL) AS one
  LEFT JOIN (SELECT finished_at, id FROM looked_at ORDER BY finished_at DESC, id DESC LIMIT 1)
         AS last ON true;

-- name: forget_empty_workflows
-- Of the workflows a retention round deleted steps of but kept, those with no step left now:
-- their last steps went in another worker's round at the same moment (prune_finished).
-- $1 workflow ids
DELETE FROM starlette_jobs_workflows AS flow
 WHERE flow.id = ANY($1::int8[])
   AND NOT EXISTS (SELECT FROM starlette_jobs AS step WHERE step.workflow_id = flow.id);

-- name: rescue_expired
-- Jobs whose worker stopped renewing the lease (it crashed or stalled): back to pending, or
-- failed when no attempt is left, or cancelled if asked to stop. The lost attempt is recorded
-- like any failed attempt. The queues of the jobs back to pending are woken: the worker that
-- rescues them may not work those queues.
-- Not those of a worker the registry saw within its last three heartbeats (its rule for a
-- live worker, worker/_registry.MISSED_HEARTBEATS): its renewal was held up, not stopped (an
-- operator's LOCK TABLE past the lease holds the renewal and this statement alike, and
-- whichever took the rows first when it ended won), and it renews the lease or gives the job
-- back itself. A frozen worker, or one whose loop is blocked, is seen no more, and its jobs
-- are rescued once it has not been for a lease.
-- $1 how many at most, $2 whether to record events
WITH expired AS (
    SELECT id FROM starlette_jobs
     WHERE status = 'running' AND lease_expires_at < now()
       AND NOT EXISTS (SELECT FROM starlette_jobs_workers AS worker
                        WHERE worker.id = starlette_jobs.worker_id
                          AND worker.last_seen
                              >= now() - make_interval(secs => worker.heartbeat_seconds * 3))
     ORDER BY lease_expires_at
     LIMIT $1
       FOR NO KEY UPDATE SKIP LOCKED
), rescued AS (
    UPDATE starlette_jobs AS job
       SET status = CASE WHEN job.cancel_requested_at IS NOT NULL THEN 'cancelled'
                         WHEN job.attempts >= job.max_attempts THEN 'failed'
                         ELSE 'pending' END,
           finished_at = CASE WHEN job.cancel_requested_at IS NOT NULL
                                   OR job.attempts >= job.max_attempts THEN now() END,
           run_at = now(),
           last_error = 'lease expired: worker ' || coalesce(job.worker_id, '?')
                        || ' stopped renewing it (crashed or stalled)',
           errors = CASE WHEN jsonb_typeof(job.errors) <> 'array' THEN '[]'::jsonb
                         WHEN jsonb_array_length(job.errors) >= 100
                         THEN job.errors - 0 ELSE job.errors END  -- the latest 100, as above
                    || jsonb_build_array(jsonb_build_object(
               'attempt', job.attempts,
               'error', 'lease expired: worker ' || coalesce(job.worker_id, '?')
                        || ' stopped renewing it (crashed or stalled)',
               'at', now(), 'worker_id', job.worker_id)),
           lease_token = NULL,
           lease_expires_at = NULL
      FROM expired
     WHERE job.id = expired.id
    RETURNING job.*
), logged AS (
    -- With the claim of the attempt it ends, as in record_outcomes.
    INSERT INTO starlette_jobs_events (job_id, kind, status, attempt, worker_id, error, run_at,
                                       claimed_at, claimed_attempt)
    SELECT id, CASE WHEN status = 'cancelled' THEN 'cancelled' ELSE 'rescued' END, status,
           attempts, worker_id, last_error, CASE WHEN status = 'pending' THEN run_at END,
           started_at, attempts
      FROM rescued WHERE $2::boolean
), notified AS (
    SELECT pg_notify('starlette_jobs:' || queue, '')
      FROM (SELECT DISTINCT queue FROM rescued WHERE status = 'pending') q
     UNION ALL
    SELECT pg_notify('starlette_jobs.outcomes', id::text) FROM rescued
     WHERE outcome_wanted AND status <> 'pending'
)
SELECT id, queue, status FROM rescued, (SELECT count(*) FROM notified) AS sent;

-- name: hold_liveness
-- A worker's liveness lock, held by its own connection for as long as the worker lives: the
-- server releases it when that connection ends (the process killed, its host gone), and
-- `rescue_dead_workers` sees it free. False: another session holds the key (a hash collision;
-- the worker's jobs are then rescued at lease expiry only).
-- $1 worker id
SELECT pg_try_advisory_lock(hashtextextended($1, 0));

-- name: wait_for_liveness
-- The worker's liveness lock, waited for (at most $2) while `end_stale_liveness` ends the
-- session of its own that still holds it: the server grants the lock to this waiting session
-- as that one exits, so it is never free in between (a peer's `rescue_dead_workers` would take
-- the worker's jobs in that moment). The wait's bound is this statement's alone.
-- $1 worker id, $2 the longest wait, as a lock_timeout ('2000ms')
WITH bounded AS MATERIALIZED (SELECT set_config('lock_timeout', $2, true))
SELECT pg_advisory_lock(hashtextextended($1, 0)) FROM bounded;

-- name: end_stale_liveness
-- The worker's own earlier liveness connection, when it still holds the lock although the worker
-- can no longer reach it (a network that dropped it silently: the server does not know it is
-- gone). Ended, waiting up to a second for it to exit, once the new session waits for the lock
-- (`wait_for_liveness`), which the server then hands over; nothing is ended unless that backend
-- holds this very key. `held`: NULL while the new session is not waiting yet (ask again in a
-- moment), true once it holds the lock. `ended`: whether the earlier backend, found holding the
-- lock, exited; NULL when none of them holds it (with `held` false: another session does).
-- `alive`: those of the earlier backends that still exist (the others hold nothing).
-- $1 worker id, $2 the backend pids of its earlier liveness sessions (the one that held the
-- lock, and any whose takeover was cut short: the server may have granted one the lock as the
-- worker stopped waiting for it), as text: the driver knows text[] without asking the server
-- (int4[] costs a look-up of several round trips on each new connection, this statement's
-- first on a pooled connection replaced after the network went silent), $3 the new one's
WITH lock AS (
    SELECT lock.pid, lock.granted
      FROM pg_locks AS lock
     WHERE lock.locktype = 'advisory' AND lock.objsubid = 1
       AND lock.database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND ((lock.classid::int8 << 32) | lock.objid::int8) = hashtextextended($1, 0)
)
SELECT mine.granted AS held,
       CASE WHEN NOT mine.granted
            THEN (SELECT pg_terminate_backend(lock.pid, 1000) FROM lock
                   WHERE lock.pid = ANY($2::text[]::int4[]) AND lock.granted) END AS ended,
       ARRAY(SELECT pid::text FROM pg_stat_activity
              WHERE pid = ANY($2::text[]::int4[])) AS alive
  FROM (SELECT) AS one LEFT JOIN lock AS mine ON mine.pid = $3;

-- name: lockless_workers
-- The registered workers, other than $1 (the caller), whose liveness lock (`hold_liveness`) is
-- free: dead, or alive and about to take again a lock that was freed under them a moment ago;
-- with when each last wrote its row (a live one writes it each time it takes its lock again).
-- None while the caller's own lock is free (see rescue_dead_workers).
WITH held AS (
    SELECT (lock.classid::int8 << 32) | lock.objid::int8 AS key
      FROM pg_locks AS lock
     WHERE lock.locktype = 'advisory' AND lock.granted AND lock.objsubid = 1
       AND lock.database = (SELECT oid FROM pg_database WHERE datname = current_database())
)
SELECT worker.id, worker.last_seen FROM starlette_jobs_workers AS worker
 WHERE worker.id IS DISTINCT FROM $1::text
   AND NOT EXISTS (SELECT FROM held WHERE held.key = hashtextextended(worker.id, 0))
   AND ($1::text IS NULL OR EXISTS (SELECT FROM held WHERE held.key = hashtextextended($1, 0)))
 ORDER BY worker.id;

-- name: rescue_dead_workers
-- The running jobs of registered workers whose liveness lock (`hold_liveness`) is free: their
-- process died, so the jobs go back to pending (or failed, or cancelled, as `rescue_expired`
-- decides) without waiting for their lease to expire. Each worker takes its lock before it
-- registers and deletes its row before it lets the lock go, so a row whose lock is free is a
-- dead worker's. Their rows are deleted with their jobs.
-- $1 how many jobs at most, $2 whether to record events, $3 the calling worker's id (never
-- rescued by itself: between losing its lock and taking it again it stops its attempts itself),
-- $4 only these workers (NULL: any), $5 as long as each row's last_seen is still this one:
-- those the caller found without their lock a while ago too (`lockless_workers`), and which
-- have not written their row since, as a live one whose lock was freed under it would have.
-- Nothing while the caller's own lock is free: what freed it (a restart of the server, which
-- frees every lock at once; an operator ending sessions; a network cut) has likely freed the
-- others' too, and live workers are taking theirs again (the caller waits a while after taking
-- its own: `worker/_liveness.py`).
WITH held AS (
    -- The advisory locks held on this database, as the bigint keys they were taken with.
    SELECT (lock.classid::int8 << 32) | lock.objid::int8 AS key
      FROM pg_locks AS lock
     WHERE lock.locktype = 'advisory' AND lock.granted AND lock.objsubid = 1
       AND lock.database = (SELECT oid FROM pg_database WHERE datname = current_database())
), dead AS (
    SELECT worker.id FROM starlette_jobs_workers AS worker
     WHERE worker.id IS DISTINCT FROM $3::text
       AND NOT EXISTS (SELECT FROM held WHERE held.key = hashtextextended(worker.id, 0))
       AND ($3::text IS NULL OR EXISTS (SELECT FROM held WHERE held.key = hashtextextended($3, 0)))
       AND ($4::text[] IS NULL OR (worker.id, worker.last_seen) IN (
                SELECT * FROM unnest($4::text[], $5::timestamptz[])))
), orphaned AS (
    SELECT id FROM starlette_jobs
     WHERE status = 'running' AND worker_id IN (SELECT id FROM dead)
     ORDER BY id
     LIMIT $1
       FOR NO KEY UPDATE SKIP LOCKED
), rescued AS (
    UPDATE starlette_jobs AS job
       SET status = CASE WHEN job.cancel_requested_at IS NOT NULL THEN 'cancelled'
                         WHEN job.attempts >= job.max_attempts THEN 'failed'
                         ELSE 'pending' END,
           finished_at = CASE WHEN job.cancel_requested_at IS NOT NULL
                                   OR job.attempts >= job.max_attempts THEN now() END,
           run_at = now(),
           last_error = 'worker ' || job.worker_id || ' died: its liveness connection closed',
           errors = CASE WHEN jsonb_typeof(job.errors) <> 'array' THEN '[]'::jsonb
                         WHEN jsonb_array_length(job.errors) >= 100
                         THEN job.errors - 0 ELSE job.errors END  -- the latest 100, as above
                    || jsonb_build_array(jsonb_build_object(
               'attempt', job.attempts,
               'error', 'worker ' || job.worker_id || ' died: its liveness connection closed',
               'at', now(), 'worker_id', job.worker_id)),
           lease_token = NULL,
           lease_expires_at = NULL
      FROM orphaned
     WHERE job.id = orphaned.id
    RETURNING job.*
), logged AS (
    -- With the claim of the attempt it ends, as in record_outcomes.
    INSERT INTO starlette_jobs_events (job_id, kind, status, attempt, worker_id, error, run_at,
                                       claimed_at, claimed_attempt)
    SELECT id, CASE WHEN status = 'cancelled' THEN 'cancelled' ELSE 'rescued' END, status,
           attempts, worker_id, last_error, CASE WHEN status = 'pending' THEN run_at END,
           started_at, attempts
      FROM rescued WHERE $2::boolean
), notified AS (
    SELECT pg_notify('starlette_jobs:' || queue, '')
      FROM (SELECT DISTINCT queue FROM rescued WHERE status = 'pending') q
     UNION ALL
    SELECT pg_notify('starlette_jobs.outcomes', id::text) FROM rescued
     WHERE outcome_wanted AND status <> 'pending'
), forgotten AS (
    -- Their rows, once no running job of theirs is left over for the next round.
    DELETE FROM starlette_jobs_workers AS worker
     WHERE worker.id IN (SELECT id FROM dead)
       AND NOT EXISTS (SELECT FROM starlette_jobs AS job
                        WHERE job.status = 'running' AND job.worker_id = worker.id
                          AND job.id NOT IN (SELECT id FROM orphaned))
)
SELECT id, queue, status FROM rescued, (SELECT count(*) FROM notified) AS sent;

-- name: get_job
-- $1 job id. The columns a JobRecord shows, not `*`: a step's `upstream` and `dependents` are
-- bigint[], a type asyncpg looks up in the catalog the first time a connection meets it
-- (15 ms, more than the read itself), and `jobs.get` and `jobs.wait` are what a status route
-- runs on whatever connection of the pool is free.
SELECT id, name, queue, status, payload, priority, attempts, max_attempts, run_at, created_at,
       started_at, finished_at, last_error, errors, worker_id, result, progress,
       cancel_requested_at, scheduled_for, workflow_id, step, trace_context
  FROM starlette_jobs WHERE id = $1;

-- name: list_jobs
-- Most recent first; a page after the one that ended at job $5 (keyset: no OFFSET to skip).
-- $1 status or NULL for any, $2 queue or NULL for any, $3 how many at most,
-- $4 job name or NULL for any, $5 only ids below this one, or NULL,
-- $6 trace id (32 lowercase hex digits, as the stored traceparent holds it) or NULL for any,
-- $7 correlation id or NULL for any. No index serves these two: the scan walks the ids down
-- until the page is full, or down to $8 (only ids above it, or NULL: the dashboard's window,
-- docs/dashboard.md says why, and what it costs).
SELECT * FROM starlette_jobs
 WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR queue = $2)
   AND ($4::text IS NULL OR name = $4) AND ($5::bigint IS NULL OR id < $5)
   AND ($6::text IS NULL OR substr(trace_context->>'traceparent', 4, 32) = $6)
   AND ($7::text IS NULL OR trace_context->>'x-request-id' = $7)
   AND ($8::bigint IS NULL OR id > $8)
 ORDER BY id DESC
 LIMIT $3;

-- name: count_by_status
-- Every job counted by status, exactly (`jobs.count_by_status`, `starlette-jobs` progress):
-- one count a status, each through the partial index that holds that status's rows
-- (claim_idx, lease_idx, status_idx) where the planner finds it cheaper than the table. A
-- `GROUP BY status` over the table read every row and every version an update left behind,
-- and hashed each status: with a million finished jobs kept, 183 ms against 72 through the
-- indexes (benchmarks/counts.py; docs/performance.md, "Counting jobs by status"). One
-- statement: one snapshot. Not status_counts with a cap past any count: its LIMIT-ed
-- subqueries cost each finished row a step more (107-134 ms against 60-85 over every queue).
SELECT 'pending' AS status, count(*) AS jobs FROM starlette_jobs
 WHERE status = 'pending'
UNION ALL
SELECT 'running', count(*) FROM starlette_jobs
 WHERE status = 'running'
UNION ALL
SELECT 'waiting', count(*) FROM starlette_jobs
 WHERE status = 'waiting'
UNION ALL
SELECT 'succeeded', count(*) FROM starlette_jobs
 WHERE status = 'succeeded'
UNION ALL
SELECT 'failed', count(*) FROM starlette_jobs
 WHERE status = 'failed'
UNION ALL
SELECT 'cancelled', count(*) FROM starlette_jobs
 WHERE status = 'cancelled';

-- name: count_by_status_of_queue
-- The same for one queue.
-- $1 queue
SELECT 'pending' AS status, count(*) AS jobs FROM starlette_jobs
 WHERE status = 'pending' AND queue = $1
UNION ALL
SELECT 'running', count(*) FROM starlette_jobs
 WHERE status = 'running' AND queue = $1
UNION ALL
SELECT 'waiting', count(*) FROM starlette_jobs
 WHERE status = 'waiting' AND queue = $1
UNION ALL
SELECT 'succeeded', count(*) FROM starlette_jobs
 WHERE status = 'succeeded' AND queue = $1
UNION ALL
SELECT 'failed', count(*) FROM starlette_jobs
 WHERE status = 'failed' AND queue = $1
UNION ALL
SELECT 'cancelled', count(*) FROM starlette_jobs
 WHERE status = 'cancelled' AND queue = $1;

-- name: status_counts
-- The jobs of one queue in each status, at a cost that does not grow with the finished jobs
-- (docs/dashboard.md): pending, running and waiting ones counted exactly through the partial
-- index of their status (claim_idx, lease_idx, status_idx), each finished status read through
-- status_idx up to one past the cap. One SELECT per status: a partial index is chosen only for a
-- status known when the statement is planned.
-- $1 queue, $2 the cap
SELECT 'pending' AS status, count(*) AS jobs FROM starlette_jobs
 WHERE status = 'pending' AND queue = $1
UNION ALL
SELECT 'running', count(*) FROM starlette_jobs
 WHERE status = 'running' AND queue = $1
UNION ALL
SELECT 'waiting', count(*) FROM starlette_jobs
 WHERE status = 'waiting' AND queue = $1
UNION ALL
SELECT 'succeeded', count(*) FROM (SELECT FROM starlette_jobs
 WHERE status = 'succeeded' AND queue = $1 LIMIT $2 + 1) AS capped
UNION ALL
SELECT 'failed', count(*) FROM (SELECT FROM starlette_jobs
 WHERE status = 'failed' AND queue = $1 LIMIT $2 + 1) AS capped
UNION ALL
SELECT 'cancelled', count(*) FROM (SELECT FROM starlette_jobs
 WHERE status = 'cancelled' AND queue = $1 LIMIT $2 + 1) AS capped;

-- name: status_counts_all
-- The same over every queue.
-- $1 the cap
SELECT 'pending' AS status, count(*) AS jobs FROM starlette_jobs
 WHERE status = 'pending'
UNION ALL
SELECT 'running', count(*) FROM starlette_jobs
 WHERE status = 'running'
UNION ALL
SELECT 'waiting', count(*) FROM starlette_jobs
 WHERE status = 'waiting'
UNION ALL
SELECT 'succeeded', count(*) FROM (SELECT FROM starlette_jobs
 WHERE status = 'succeeded' LIMIT $1 + 1) AS capped
UNION ALL
SELECT 'failed', count(*) FROM (SELECT FROM starlette_jobs
 WHERE status = 'failed' LIMIT $1 + 1) AS capped
UNION ALL
SELECT 'cancelled', count(*) FROM (SELECT FROM starlette_jobs
 WHERE status = 'cancelled' LIMIT $1 + 1) AS capped;

-- name: queue_depths
-- The unfinished jobs of every queue, for the gauges (docs/metrics.md): pending ones (those due
-- now among them, and how many seconds the oldest due one has waited) and running ones. Each
-- half reads the partial index of its status, never the finished jobs. No parameter.
SELECT queue,
       sum(pending)::bigint AS pending,
       sum(due)::bigint AS due,
       sum(running)::bigint AS running,
       -- Epochs apart, not `now() - run_at`: an interval cannot hold a run_at an operator set
       -- to '-infinity' (PostgreSQL 15 refuses, and every queue's gauges would freeze).
       coalesce(extract(epoch FROM now()) - extract(epoch FROM min(oldest_due)), 0)::float8
           AS oldest_due_age
  FROM (SELECT queue, count(*) AS pending, count(*) FILTER (WHERE run_at <= now()) AS due,
               0 AS running, min(run_at) FILTER (WHERE run_at <= now()) AS oldest_due
          FROM starlette_jobs
         WHERE status = 'pending'
         GROUP BY queue
        UNION ALL
        SELECT queue, 0, 0, count(*), NULL
          FROM starlette_jobs
         WHERE status = 'running'
         GROUP BY queue) AS counted
 GROUP BY queue
 ORDER BY queue;

-- name: count_unfinished
-- Jobs of these queues that are running, or pending and due within $2 seconds (a retry, a
-- pending job with an attempt behind it: within $3 seconds): what `drain` waits for; and the
-- pending jobs due later, first attempts and retries apart, and pending jobs of names the
-- worker does not know (left for a worker that knows them): what it leaves.
-- $1 queue names, $2 horizon in seconds (0: due now; NULL: any pending job),
-- $3 the same for retries, $4 the job names the worker knows (NULL: any name)
SELECT count(*) FILTER (WHERE waited AND known) AS waited,
       count(*) FILTER (WHERE NOT waited AND known AND attempts = 0) AS scheduled,
       count(*) FILTER (WHERE NOT waited AND known AND attempts > 0) AS retries,
       count(*) FILTER (WHERE NOT known) AS unknown
  FROM (SELECT attempts,
               status = 'running'
               OR coalesce(run_at <= now() + make_interval(
                      secs => CASE WHEN attempts > 0 THEN $3::float8 ELSE $2::float8 END),
                   true) AS waited,
               status = 'running' OR $4::text[] IS NULL OR name = ANY($4::text[]) AS known
          FROM starlette_jobs
         WHERE queue = ANY($1::text[]) AND status IN ('pending', 'running')) AS unfinished;

-- name: cancel_job
-- A pending job (or a workflow's waiting step) becomes cancelled; a running one is asked to
-- stop (once), and its worker is told at once, wherever it runs. Returns the job's status
-- after: 'cancelled', or 'running' (asked to stop), and `owed`: a cancelled step has steps
-- waiting for it, to tell (`settle_steps`); nothing if it was neither pending, waiting nor
-- running, or was asked already.
-- $1 job id, $2 whether to record events, $3 who asked (the event's actor) or NULL
WITH changed AS (
    UPDATE starlette_jobs
       SET status = CASE WHEN status IN ('pending', 'waiting') THEN 'cancelled' ELSE status END,
           finished_at = CASE WHEN status IN ('pending', 'waiting') THEN now()
                              ELSE finished_at END,
           cancel_requested_at = CASE WHEN status = 'running' THEN now() END
     WHERE id = $1
       AND (status IN ('pending', 'waiting')
            OR (status = 'running' AND cancel_requested_at IS NULL))
    RETURNING id, status, attempts, worker_id, lease_token, outcome_wanted, dependents
), logged AS (
    INSERT INTO starlette_jobs_events (job_id, kind, status, attempt, worker_id, actor)
    SELECT id, CASE WHEN status = 'running' THEN 'cancel_requested' ELSE 'cancelled' END,
           status, attempts, worker_id, $3::text
      FROM changed WHERE $2::boolean
)
SELECT status,
       CASE WHEN status = 'running' THEN pg_notify('starlette_jobs.cancel', lease_token::text)
            WHEN outcome_wanted THEN pg_notify('starlette_jobs.outcomes', id::text) END,
       status = 'cancelled' AND dependents IS NOT NULL AS owed
  FROM changed;

-- name: retry_job
-- A failed or cancelled job runs again from its first attempt, now; its error history stays.
-- Not a workflow's step more of whose upstream failed than it allows: that one first. A step
-- whose upstream has not all finished (one cancelled while it waited) waits for it again, counted as `reopen_steps` counts: the store locks the row first (`lock_steps`),
-- so that this statement sees every statement that told it.
-- $1 job id, $2 whether to record events, $3 who asked (the event's actor) or NULL
WITH counted AS (
    SELECT count(*) FILTER (WHERE NOT (up.settled
                                       AND up.status IN ('succeeded', 'failed', 'cancelled')))
               AS left_to_finish,
           count(*) FILTER (WHERE up.settled AND up.status IN ('failed', 'cancelled')) AS failed
      FROM starlette_jobs AS job JOIN starlette_jobs AS up ON up.id = ANY(job.upstream)
     WHERE job.id = $1
), retried AS (
    UPDATE starlette_jobs AS job
       SET status = CASE WHEN counted.left_to_finish > 0
                              AND counted.failed <= job.allowed_failures
                         THEN 'waiting' ELSE 'pending' END,
           upstream_left = CASE WHEN job.upstream IS NOT NULL THEN counted.left_to_finish END,
           upstream_failed = CASE WHEN job.upstream IS NOT NULL THEN counted.failed END,
           attempts = 0, run_at = now(), finished_at = NULL, result = NULL,
           progress = NULL, cancel_requested_at = NULL, outcome_wanted = false,
           -- A workflow's step tells the steps waiting for it again when it finishes again.
           settled = false
      FROM counted
     WHERE job.id = $1 AND job.status IN ('failed', 'cancelled')
       -- A step more of whose upstream failed than it allows would run without it: refused
       -- (one cancelled by hand while it waited is not told of the failures after).
       AND (job.upstream IS NULL OR counted.failed <= job.allowed_failures)
    RETURNING job.id, job.queue, job.status, job.attempts, job.run_at, job.dependents
), logged AS (
    INSERT INTO starlette_jobs_events (job_id, kind, status, attempt, run_at, actor)
    SELECT id, 'retried', status, attempts, run_at, $3::text FROM retried WHERE $2::boolean
)
SELECT queue, pg_notify('starlette_jobs:' || queue, ''), dependents FROM retried;

-- name: job_status
-- $1 job id
SELECT status FROM starlette_jobs WHERE id = $1;

-- name: record_progress
-- The last progress of running attempts, fenced by their lease tokens like every write after
-- a claim. Returns the ids written.
-- $1 ids, $2 lease tokens, $3 progress (JSON texts)
UPDATE starlette_jobs AS job
   SET progress = given.progress::jsonb
  FROM unnest($1::bigint[], $2::uuid[], $3::text[]) AS given(id, lease_token, progress)
 WHERE job.id = given.id AND job.lease_token = given.lease_token
RETURNING job.id;

-- name: peek_jobs
-- The jobs the next claim of a queue would take, in claim order, locking and writing nothing.
-- $1 queue, $2 how many at most, $3 ids to leave out
SELECT * FROM starlette_jobs
 WHERE queue = $1 AND status = 'pending' AND run_at <= now() AND id <> ALL($3::bigint[])
 ORDER BY priority DESC, run_at, id
 LIMIT $2;

-- name: job_events
-- A job's history, oldest first: its enqueueing (the row itself), then its recorded events, then
-- what the row says of its last attempt: the claim of the attempt running now (a row of no
-- kind: when and by whom it was claimed), or its success, with that attempt's claim (nothing
-- changes a job after it succeeded). Both are told whatever the `events` settings, as
-- `enqueued` is. A recorded event that ends an attempt carries that attempt's claim
-- (`claimed_at`): the store places each claim before its attempt's events
-- (postgres/_history.py).
-- $1 job id
-- Each event names the job's workflow, if it is a step of one.
WITH job AS (
    SELECT id, created_at, upstream, workflow_id, status, started_at, finished_at, attempts,
           worker_id
      FROM starlette_jobs WHERE id = $1
)
SELECT id AS job_id, 'enqueued' AS kind, created_at AS at,
       CASE WHEN upstream IS NULL THEN 'pending' ELSE 'waiting' END AS status, 0 AS attempt,
       NULL AS worker_id, NULL AS error, NULL::timestamptz AS run_at, 0::bigint AS seq,
       workflow_id, NULL AS actor, NULL::timestamptz AS claimed_at, NULL::int4 AS claimed_attempt
  FROM job
UNION ALL
SELECT job_id, kind, at, status, attempt, worker_id, error, run_at, id,
       (SELECT workflow_id FROM job), actor, claimed_at, claimed_attempt
  FROM starlette_jobs_events WHERE job_id = $1
UNION ALL
SELECT id, CASE WHEN status = 'succeeded' THEN 'succeeded' END, finished_at,
       CASE WHEN status = 'succeeded' THEN 'succeeded' END, attempts, worker_id, NULL, NULL,
       9223372036854775807, workflow_id, NULL, started_at, attempts
  FROM job WHERE status IN ('running', 'succeeded')
 ORDER BY seq;

-- name: want_outcome
-- Someone waits for this job's outcome: the statement that finishes it will NOTIFY. An UPDATE
-- while the flag is not set yet: should an outcome be committing at this moment, it waits for
-- it and returns the status that outcome wrote, so that either the outcome sees the flag or this
-- sees the outcome. Once set, the flag is only read: a waiter's periodic look writes nothing.
-- The UPDATE locks the row for the statement: a claim at that moment skips the job (SKIP LOCKED)
-- and may find nothing else, and its worker would leave the job to the next poll; so a job due
-- now wakes its queue, once this commits. Returns the job's status, or nothing if there is no
-- such job.
-- $1 job id
WITH wanted AS (
    UPDATE starlette_jobs SET outcome_wanted = true
     WHERE id = $1 AND NOT outcome_wanted
    RETURNING status, queue, run_at
), woken AS (
    SELECT pg_notify('starlette_jobs:' || queue, '') FROM wanted
     WHERE status = 'pending' AND run_at <= now()
)
SELECT status FROM wanted, (SELECT count(*) FROM woken) AS sent
UNION ALL
SELECT status FROM starlette_jobs WHERE id = $1 AND NOT EXISTS (SELECT FROM wanted);

-- Periodic jobs (docs/schedules.md): the schedules the workers declare, and their ticks.

-- name: declare_schedules
-- A worker's code declares these schedules and no others: writes each whose definition is new
-- or changed (a changed one starts afresh: a tick waiting under its old form is skipped), and
-- deletes the others with their ticks. The names come sorted: two workers declaring at once
-- lock the rows in one order.
-- $1 names, $2 definitions (JSON texts), $3 their hashes
WITH given AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
        AS given(name, definition, definition_hash)
), removed AS (
    DELETE FROM starlette_jobs_schedules WHERE name <> ALL($1::text[]) RETURNING name
), forgotten AS (
    DELETE FROM starlette_jobs_ticks AS tick USING removed WHERE tick.schedule = removed.name
), written AS (
    INSERT INTO starlette_jobs_schedules AS schedule (name, definition, definition_hash)
    SELECT name, definition::jsonb, definition_hash FROM given ORDER BY name
    ON CONFLICT (name) DO UPDATE
       SET definition = excluded.definition, definition_hash = excluded.definition_hash,
           defined_at = now(), waiting_tick_at = NULL
     WHERE schedule.definition_hash <> excluded.definition_hash
    RETURNING name
), abandoned AS (
    UPDATE starlette_jobs_ticks AS tick
       SET status = 'skipped', reason = 'the schedule changed while this tick waited'
      FROM written WHERE tick.schedule = written.name AND tick.status = 'waiting'
)
SELECT (SELECT count(*) FROM removed) AS removed, (SELECT count(*) FROM written) AS written;

-- name: list_schedules
-- Every stored schedule, by name, with its latest tick.
SELECT schedule.name, schedule.definition::text AS definition, schedule.definition_hash,
       schedule.defined_at, schedule.last_tick_at, schedule.waiting_tick_at,
       tick.schedule, tick.tick_at, tick.status, tick.reason, tick.job_id, tick.recorded_at,
       tick.worker_id
  FROM starlette_jobs_schedules AS schedule
  LEFT JOIN starlette_jobs_ticks AS tick
         ON tick.schedule = schedule.name AND tick.tick_at = schedule.last_tick_at
 ORDER BY schedule.name;

-- name: lock_schedule
-- The first statement of a tick's transaction: the schedule's row, locked while the tick is
-- decided, if its stored definition is still this one. Ticks of one schedule are decided one
-- after the other, and the next statement (a new snapshot) sees the job the last one made.
-- NOWAIT: a row locked elsewhere (another worker recording this tick, an operator's session)
-- fails the tick at once, and the ticker goes on with the other schedules; waiting, every
-- worker's round stopped at that schedule for as long as the lock lasted.
-- $1 schedule name, $2 definition hash
SELECT name FROM starlette_jobs_schedules
 WHERE name = $1 AND definition_hash = $2
   FOR NO KEY UPDATE NOWAIT;

-- name: record_tick
-- Records one tick of a schedule whose row `lock_schedule` holds, unless a worker recorded it
-- already (the primary key), and enqueues its job, in one statement: a tick is never recorded
-- without its job, nor a job enqueued for a tick that is not recorded. The overlap policy looks
-- at the job the schedule's latest enqueued tick made. Returns the tick, or nothing. A tick not
-- due yet by the database's clock (a worker's clock runs fast) is not recorded: the database
-- decides when a tick is due, with a second's slack (`_schedule_records.EARLY_TICK_SLACK`).
-- Nor is one at or before the schedule's latest tick: decided already, though its record may be
-- gone (`prune_ticks`), by a worker whose round came first; unless that latest tick is more
-- than a minute ahead of the database's clock (`_schedule_records.CLOCK_SET_BACK`): recorded
-- while the clocks ran ahead, and set back since, it would hold the schedule until they
-- caught up with it again (a day ahead: a day without a tick).
-- $1 schedule, $2 tick time, $3 overlap ('allow', 'skip', 'one_waiting'), $4 skip reason or
-- NULL (recorded as skipped, no job), $5 note for an enqueued tick or NULL, $6 job name,
-- $7 queue, $8 payload (JSON text), $9 priority, $10 max_attempts, $11 worker id
WITH schedule AS (
    SELECT name, last_job_id, waiting_tick_at, last_tick_at
      FROM starlette_jobs_schedules WHERE name = $1
), previous AS (
    SELECT job.id, job.status
      FROM schedule JOIN starlette_jobs AS job ON job.id = schedule.last_job_id
     WHERE job.status IN ('pending', 'running')
), decided AS (
    -- A tick waiting keeps its turn even once the job it waits for has ended: the next tick
    -- may come before a worker starts it, and must not be enqueued ahead of it.
    SELECT CASE WHEN $4::text IS NOT NULL THEN 'skipped'
                WHEN $3 = 'allow' THEN 'enqueued'
                WHEN $3 = 'one_waiting' AND schedule.waiting_tick_at IS NOT NULL THEN 'skipped'
                WHEN previous.id IS NULL THEN 'enqueued'
                WHEN $3 = 'one_waiting' THEN 'waiting'
                ELSE 'skipped' END AS status,
           CASE WHEN $4::text IS NOT NULL THEN $4
                WHEN $3 = 'allow' THEN $5
                WHEN $3 = 'one_waiting' AND schedule.waiting_tick_at IS NOT NULL
                THEN 'overlap: a tick waits already'
                     || coalesce(', behind job ' || previous.id, '')
                WHEN previous.id IS NULL THEN $5
                WHEN $3 = 'one_waiting'
                THEN 'waits for job ' || previous.id || ' of an earlier tick, still '
                     || previous.status
                ELSE 'overlap: job ' || previous.id || ' of an earlier tick is still '
                     || previous.status END AS reason
      FROM schedule LEFT JOIN previous ON true
     WHERE $2 <= statement_timestamp() + interval '1 second'
       AND (schedule.last_tick_at IS NULL OR $2 > schedule.last_tick_at
            OR schedule.last_tick_at > statement_timestamp() + interval '1 minute')
), tick AS (
    INSERT INTO starlette_jobs_ticks (schedule, tick_at, status, reason, job_id, worker_id)
    SELECT $1, $2, status, reason,
           CASE WHEN status = 'enqueued'
                THEN nextval(pg_get_serial_sequence('starlette_jobs', 'id')) END, $11
      FROM decided
    ON CONFLICT DO NOTHING
    RETURNING *
), job AS (
    INSERT INTO starlette_jobs (id, name, queue, payload, priority, max_attempts, scheduled_for,
                                created_at, run_at)
    OVERRIDING SYSTEM VALUE
    SELECT job_id, $6, $7, $8::jsonb, $9, $10, tick_at, statement_timestamp(),
           statement_timestamp()
      FROM tick WHERE job_id IS NOT NULL
    RETURNING id, pg_notify('starlette_jobs:' || queue, '') AS notified
), moved AS (
    UPDATE starlette_jobs_schedules AS schedule
       SET last_tick_at = tick.tick_at,
           last_job_id = coalesce(tick.job_id, schedule.last_job_id),
           waiting_tick_at = CASE WHEN tick.status = 'waiting' THEN tick.tick_at
                                  ELSE schedule.waiting_tick_at END
      FROM tick WHERE schedule.name = tick.schedule
)
SELECT tick.schedule, tick.tick_at, tick.status, tick.reason, tick.job_id, tick.recorded_at,
       tick.worker_id
  FROM tick, (SELECT count(*) FROM job) AS written;

-- name: start_waiting_tick
-- Enqueues the job of the tick waiting (overlap 'one_waiting') on a schedule whose row
-- `lock_schedule` holds, once the job of the tick before it has finished. Returns the tick,
-- or nothing (none waits, or that job is still pending or running).
-- $1 schedule, $2 job name, $3 queue, $4 payload (JSON text), $5 priority, $6 max_attempts
WITH ready AS (
    SELECT schedule.name, schedule.waiting_tick_at,
           nextval(pg_get_serial_sequence('starlette_jobs', 'id')) AS job_id
      FROM starlette_jobs_schedules AS schedule
     WHERE schedule.name = $1 AND schedule.waiting_tick_at IS NOT NULL
       AND NOT EXISTS (SELECT FROM starlette_jobs AS job
                        WHERE job.id = schedule.last_job_id
                          AND job.status IN ('pending', 'running'))
), tick AS (
    UPDATE starlette_jobs_ticks AS tick
       SET status = 'enqueued', job_id = ready.job_id,
           reason = 'waited for the job of an earlier tick to finish'
      FROM ready
     WHERE tick.schedule = ready.name AND tick.tick_at = ready.waiting_tick_at
    RETURNING tick.*
), job AS (
    INSERT INTO starlette_jobs (id, name, queue, payload, priority, max_attempts, scheduled_for,
                                created_at, run_at)
    OVERRIDING SYSTEM VALUE
    SELECT job_id, $2, $3, $4::jsonb, $5, $6, tick_at, statement_timestamp(),
           statement_timestamp()
      FROM tick
    RETURNING id, pg_notify('starlette_jobs:' || queue, '') AS notified
), moved AS (
    UPDATE starlette_jobs_schedules AS schedule
       SET waiting_tick_at = NULL, last_job_id = tick.job_id
      FROM tick WHERE schedule.name = tick.schedule
)
SELECT tick.schedule, tick.tick_at, tick.status, tick.reason, tick.job_id, tick.recorded_at,
       tick.worker_id
  FROM tick, (SELECT count(*) FROM job) AS written;

-- name: schedule_ticks
-- A schedule's latest ticks, latest first.
-- $1 schedule, $2 how many at most
SELECT schedule, tick_at, status, reason, job_id, recorded_at, worker_id
  FROM starlette_jobs_ticks WHERE schedule = $1
 ORDER BY tick_at DESC
 LIMIT $2;

-- name: prune_ticks
-- Keeps each schedule's latest $1 ticks (and a waiting one, whatever its age); returns how
-- many it deleted.
-- $1 how many ticks to keep per schedule
WITH ranked AS (
    SELECT schedule, tick_at, status,
           row_number() OVER (PARTITION BY schedule ORDER BY tick_at DESC) AS position
      FROM starlette_jobs_ticks
), deleted AS (
    DELETE FROM starlette_jobs_ticks AS tick USING ranked
     WHERE tick.schedule = ranked.schedule AND tick.tick_at = ranked.tick_at
       AND ranked.position > $1 AND ranked.status <> 'waiting'
    RETURNING 1
)
SELECT count(*) FROM deleted;
-- Queue controls (docs/limits.md): one row per queue in starlette_jobs_queues. A change of a
-- row NOTIFYs 'starlette_jobs.controls' with the queue's name, so that workers read it again
-- at once rather than at their next poll.

-- name: set_queue_paused
-- Pauses or resumes a queue, whether or not it has a row yet.
-- $1 queue, $2 paused
INSERT INTO starlette_jobs_queues AS q (name, paused) VALUES ($1, $2)
    ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = now()
RETURNING pg_notify('starlette_jobs.controls', q.name);

-- name: declare_queues
-- A worker starting writes the limits it declares for its queues; the last one wins. A row
-- whose limits are already these is left alone, and no one is told.
-- $1 queue names, $2 global limits, $3 the arguments a key limit reads, $4 key limits,
-- $5 rate limits (NULL: none), $6 rate periods in seconds
INSERT INTO starlette_jobs_queues AS q
       (name, global_limit, limit_key, key_limit, rate_limit, rate_period)
SELECT * FROM unnest($1::text[], $2::int4[], $3::text[], $4::int4[], $5::int4[], $6::float8[])
    ON CONFLICT (name) DO UPDATE
   SET global_limit = excluded.global_limit, limit_key = excluded.limit_key,
       key_limit = excluded.key_limit, rate_limit = excluded.rate_limit,
       rate_period = excluded.rate_period, updated_at = now()
 WHERE (q.global_limit, q.limit_key, q.key_limit, q.rate_limit, q.rate_period)
       IS DISTINCT FROM (excluded.global_limit, excluded.limit_key, excluded.key_limit,
                         excluded.rate_limit, excluded.rate_period)
RETURNING pg_notify('starlette_jobs.controls', q.name);

-- name: queue_controls
-- The rows of these queues (a queue without one is neither paused nor limited).
-- $1 queue names
SELECT name, paused, global_limit, limit_key, key_limit, rate_limit, rate_period
  FROM starlette_jobs_queues WHERE name = ANY($1::text[]);

-- name: lock_queue
-- Begins the transaction of a limited queue's claim that found the queue's row changed since
-- its snapshot (see `claim_limited_batch`): once the row is this transaction's, the claim that
-- follows, a statement of its own, sees what every claim before it committed.
-- $1 queue
SELECT FROM starlette_jobs_queues WHERE name = $1 FOR NO KEY UPDATE;

-- name: claim_limited_batch
-- `claim_batch` for a queue with limits. Claims of one queue take turns on its row (FOR NO KEY
-- UPDATE: it conflicts with itself and with a pause, which is all that is needed), each counting
-- the jobs the others claimed. But a statement reads what had committed when it began, not
-- when it got the lock: should a claim of the queue have committed meanwhile (`claim_seq`
-- moved on), this one counts on a stale picture. It then takes nothing and says so (`stale`):
-- the store claims again after `lock_queue`, in a transaction. A claim that waited for no one
-- (the usual case) costs one statement, as an unlimited queue's does.
-- It takes no more than leave at most `global_limit` running (counting the queue's running
-- jobs: a small set, found through the index on running rows), at most `key_limit` running per
-- value of the argument `limit_key` (read from the payload; a job without it is not limited by
-- it), and no more starts in any `rate_period` than `rate_limit` (the latest starts are kept in
-- the row, this statement's own included). With a key limit it looks at the first $5 due jobs,
-- in claim order, so that it stays bounded however long the queue. The jobs are read without
-- a lock (no other claim of the queue runs meanwhile): the UPDATE takes those still pending.
-- Returns the claims, in the order of `Claim`'s fields, each with `stale` false; or one row of
-- NULLs with `stale` true.
-- $1 queue, $2 how many at most (the worker's free slots), $3 worker id,
-- $4 lease duration in seconds, $5 how many due jobs a key limit looks at, $6 the lease
-- tokens of attempts that have ended but whose outcome is not written yet (not counted as
-- running), $7 the job names the worker knows (NULL: any name)
WITH seen AS (
    SELECT claim_seq FROM starlette_jobs_queues WHERE name = $1
), turn AS (
    -- The row as the claim before this one left it.
    SELECT * FROM starlette_jobs_queues WHERE name = $1 FOR NO KEY UPDATE
), q AS (
    SELECT turn.*, turn.claim_seq = (SELECT claim_seq FROM seen) AS fresh FROM turn
), running AS (
    SELECT payload ->> (SELECT limit_key FROM q) AS key
      FROM starlette_jobs
     WHERE queue = $1 AND status = 'running' AND lease_token <> ALL($6::uuid[])
), per_key AS (
    SELECT key, count(*) AS running FROM running WHERE key IS NOT NULL GROUP BY key
), room AS (
    SELECT CASE WHEN q.paused OR NOT q.fresh THEN 0
                ELSE least($2::int8,
                           q.global_limit - (SELECT count(*) FROM running),
                           q.rate_limit - (SELECT count(*) FROM unnest(q.recent_starts) AS s(at)
                                            WHERE at > statement_timestamp()
                                                       - make_interval(secs => q.rate_period)
                                              -- A start "after now" was recorded before the
                                              -- clock was set back: not within this period
                                              -- (else the queue would stall until that time).
                                              AND at <= statement_timestamp()))
           END AS jobs
      FROM q
), due AS (
    SELECT id, payload ->> (SELECT limit_key FROM q) AS key,
           row_number() OVER (ORDER BY priority DESC, run_at, id) AS position
      FROM (SELECT id, payload, priority, run_at FROM starlette_jobs
             WHERE queue = $1 AND status = 'pending' AND run_at <= now()
               AND ($7::text[] IS NULL OR name = ANY($7::text[]))
             ORDER BY priority DESC, run_at, id
             LIMIT CASE WHEN (SELECT key_limit FROM q) IS NULL THEN $2 ELSE $5 END) AS first_due
), ranked AS (
    SELECT id, key, position, row_number() OVER (PARTITION BY key ORDER BY position) AS nth
      FROM due
), picked AS (
    SELECT ranked.id FROM ranked LEFT JOIN per_key USING (key)
     WHERE ranked.key IS NULL
        OR ranked.nth + coalesce(per_key.running, 0) <= (SELECT key_limit FROM q)
     ORDER BY ranked.position
     LIMIT greatest(coalesce((SELECT jobs FROM room), $2::int8), 0)
), claimed AS (
    UPDATE starlette_jobs AS job
       SET status = 'running',
           attempts = least(job.attempts, 2147483646) + 1,  -- as in claim_batch
           worker_id = $3,
           -- As in claim_batch.
           lease_token = ((SELECT left(gen_random_uuid()::text, 19))
                          || encode(int8send(job.id), 'hex'))::uuid,
           lease_expires_at = now() + make_interval(secs => $4),
           started_at = now(),
           progress = NULL
     WHERE job.id = ANY(ARRAY(SELECT id FROM picked)) AND job.status = 'pending'
    RETURNING job.id, job.name, job.queue, job.payload::text AS payload, job.attempts,
              job.max_attempts, job.lease_token, job.trace_context::text AS trace_context,
              job.scheduled_for, job.workflow_id
), started AS (
    -- The next claim's turn, and the latest rate_limit starts, the oldest first (those "after
    -- now" dropped: kept as the latest, they would push out every start made from now on).
    UPDATE starlette_jobs_queues AS queue
       SET claim_seq = queue.claim_seq + 1,
           recent_starts = CASE WHEN queue.rate_limit IS NULL THEN '{}' ELSE array(
               SELECT at FROM (SELECT at FROM unnest(queue.recent_starts
                                                     || array_fill(statement_timestamp(),
                                                                   ARRAY[(SELECT count(*)
                                                                            FROM claimed)::int4]))
                                              AS s(at)
                                WHERE at <= statement_timestamp()
                                ORDER BY at DESC LIMIT queue.rate_limit) AS kept
                ORDER BY at) END
     WHERE queue.name = $1 AND EXISTS (SELECT FROM claimed)
)
SELECT claimed.*, false AS stale FROM claimed
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, true FROM q WHERE NOT q.fresh;

-- name: wake_queues
-- Jobs of these limited queues finished: a worker that found no room may claim now.
-- $1 queue names
SELECT pg_notify('starlette_jobs:' || queue, '') FROM unnest($1::text[]) AS queue;

-- name: register_worker
-- A worker starting: its row, started and seen now.
-- $1 id, $2 host, $3 pid, $4 queues, $5 job names, $6 version, $7 seconds between heartbeats,
-- $8 the schedules its code declares (JSON text: {name: definition hash})
INSERT INTO starlette_jobs_workers
       (id, host, pid, queues, job_names, version, heartbeat_seconds, schedules)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb)
ON CONFLICT (id) DO UPDATE
   SET host = EXCLUDED.host, pid = EXCLUDED.pid, queues = EXCLUDED.queues,
       job_names = EXCLUDED.job_names, version = EXCLUDED.version,
       heartbeat_seconds = EXCLUDED.heartbeat_seconds, schedules = EXCLUDED.schedules,
       -- Written again when it takes its liveness lock again (after a server restart) or
       -- declares more job names: it started when it first wrote its row.
       last_seen = now();

-- name: worker_schedules
-- The schedules the code of each registered worker declares (JSON text), by worker id.
SELECT id, schedules::text FROM starlette_jobs_workers ORDER BY id;

-- name: worker_seen
-- A worker's heartbeat; no row returned: it has no row.
-- $1 worker id
UPDATE starlette_jobs_workers SET last_seen = now() WHERE id = $1 RETURNING id;

-- name: unregister_worker
-- A worker stopping cleanly.
-- $1 worker id
DELETE FROM starlette_jobs_workers WHERE id = $1;

-- name: list_workers
-- The live workers, by id: those seen within $1 of their heartbeat intervals. A dead worker's
-- row stays until a live one deletes it, which none may be left to do (the whole fleet was
-- killed, or only a web process that runs no worker is left).
-- $1 missed heartbeats (`_worker_records.MISSED_HEARTBEATS`)
SELECT id, host, pid, queues, job_names, version, started_at, last_seen, heartbeat_seconds
  FROM starlette_jobs_workers
 WHERE last_seen >= now() - make_interval(secs => heartbeat_seconds * $1)
 ORDER BY id;

-- name: prune_workers
-- The rows of workers unseen for this many of their own heartbeat intervals: they died.
-- $1 missed heartbeats
DELETE FROM starlette_jobs_workers
 WHERE last_seen < now() - make_interval(secs => heartbeat_seconds * $1)
RETURNING id;

-- name: unrunnable_jobs
-- Pending jobs that no live worker can run: none in the registry both works their queue and
-- knows their name (docs/workers.md, "Rolling deploys"), counted by queue and name.
-- With $1, only these queues, and only the first $2 due jobs of each in claim order: what a
-- worker looks at, bounded however long the queue (jobs no worker claims gather at its head).
-- Without it ($1 NULL), every pending job, due or not: what an operator is shown.
-- A worker unseen for $3 of its heartbeat intervals is dead (`list_workers`), and runs none.
-- $1 queue names or NULL, $2 how many due jobs per queue, $3 missed heartbeats
WITH candidate AS (
    SELECT queue, name, run_at FROM starlette_jobs
     WHERE $1::text[] IS NULL AND status = 'pending'
    UNION ALL
    SELECT head.queue, head.name, head.run_at
      FROM unnest($1::text[]) AS worked(queue)
     CROSS JOIN LATERAL (
        SELECT queue, name, run_at FROM starlette_jobs
         WHERE queue = worked.queue AND status = 'pending' AND run_at <= now()
         ORDER BY priority DESC, run_at, id
         LIMIT $2) AS head
)
SELECT queue, name, count(*) AS pending, min(run_at) AS oldest_run_at
  FROM candidate
 WHERE NOT EXISTS (SELECT FROM starlette_jobs_workers AS worker
                    WHERE candidate.queue = ANY(worker.queues)
                      AND candidate.name = ANY(worker.job_names)
                      AND worker.last_seen
                          >= now() - make_interval(secs => worker.heartbeat_seconds * $3))
 GROUP BY queue, name
 ORDER BY queue, name;

-- Workflows (docs/workflows.md): steps are job rows of a workflow_id; a step that waits for
-- others is 'waiting', which no claim looks at, until the statement that writes the outcome of
-- the last step it waits for releases it (record_outcomes, record_successes, settle_steps).

-- name: insert_workflow
-- A workflow and all its steps in one statement; returns the workflow's id and the steps' ids,
-- in the order given (each step after those it waits for). A step that waits for none is
-- pending, the others waiting, each with the count of steps it waits for; each holds the ids
-- of the steps it waits for (upstream) and of those waiting for it (dependents). Few
-- parameters per step, none of them an object, lists of numbers as text joined by ',' (parsed
-- in one call instead of one per element; docs/performance.md, "With workflows"): the ids are
-- drawn in one array, and each step's upstream and dependents are slices of one array each,
-- mapped from positions to ids once.
-- $1 workflow name, $2 trace context (JSON text) or NULL, $3 step names joined by ','
-- (a step name has no comma), $4 payloads (one JSON array, an element per step),
-- $5 $6 $7 $8 the jobs of the steps: names, queues, priorities, max_attempts; $9 each step's
-- job (a position in those, from 0; text); the steps that wait: $10 their positions (from 1),
-- $11 their allowed failures, $12 and $13 the first and last position in $14 of the steps
-- each waits for; $14 positions (from 0) of steps waited for (text); $15 positions (from 0)
-- of dependents, grouped by the step they wait for in step order (text), a step's group
-- being $15's elements bounds[position] + 1 to bounds[position + 1], the bounds being $16
-- (text); $17 the queues to wake; $18 how many steps
WITH workflow AS (
    INSERT INTO starlette_jobs_workflows (name, trace_context, created_at)
    VALUES ($1, $2::jsonb, statement_timestamp())
    RETURNING id
), drawn AS MATERIALIZED (
    -- As an identity column draws them, the sequence looked up once (not once per row).
    SELECT ARRAY(SELECT nextval((SELECT pg_get_serial_sequence('starlette_jobs', 'id')
                                              ::regclass))
                   FROM generate_series(1, $18::int4)) AS ids
), edge AS MATERIALIZED (
    SELECT ARRAY(SELECT drawn.ids[up + 1]
                   FROM unnest(string_to_array($14, ',')::int4[]) WITH ORDINALITY AS e(up, o)
                  ORDER BY o) AS upstream,
           ARRAY(SELECT drawn.ids[down + 1]
                   FROM unnest(string_to_array($15, ',')::int4[]) WITH ORDINALITY AS e(down, o)
                  ORDER BY o) AS dependents,
           string_to_array($16, ',')::int4[] AS bounds
      FROM drawn
), inserted AS (
    INSERT INTO starlette_jobs
        (id, name, queue, payload, priority, max_attempts, trace_context, created_at, run_at,
         status, workflow_id, step, upstream, dependents, upstream_left, upstream_failed,
         allowed_failures)
    OVERRIDING SYSTEM VALUE
    SELECT drawn.ids[given.position], ($5::text[])[given.job::int4 + 1],
           ($6::text[])[given.job::int4 + 1], given.payload, ($7::int4[])[given.job::int4 + 1],
           ($8::int4[])[given.job::int4 + 1], $2::jsonb,
           statement_timestamp(), statement_timestamp(),
           CASE WHEN waits.position IS NULL THEN 'pending' ELSE 'waiting' END,
           (SELECT id FROM workflow), given.step, edge.upstream[waits.first:waits.last],
           CASE WHEN edge.bounds[given.position + 1] > edge.bounds[given.position]
                THEN edge.dependents[edge.bounds[given.position] + 1
                                     :edge.bounds[given.position + 1]] END,
           waits.last - waits.first + 1, CASE WHEN waits.position IS NOT NULL THEN 0 END,
           waits.allowed_failures
      FROM drawn, edge,
           ROWS FROM (string_to_table($3, ','), jsonb_array_elements($4::jsonb),
                      string_to_table($9, ','))
           WITH ORDINALITY AS given(step, payload, job, position)
      LEFT JOIN unnest($10::int4[], $11::int4[], $12::int4[], $13::int4[])
                AS waits(position, allowed_failures, first, last)
             ON waits.position = given.position
), woken AS (
    SELECT pg_notify('starlette_jobs:' || queue, '') FROM unnest($17::text[]) AS queue
)
SELECT (SELECT id FROM workflow) AS workflow_id, (SELECT ids FROM drawn) AS ids,
       (SELECT count(*) FROM woken) AS sent;

-- name: settle_steps
-- Tells the steps waiting for finished steps that have not told them yet (a step cancelled
-- because of a step it waited for, or finished by a rescue), as record_outcomes tells them for
-- the steps it finishes. Returns how many steps it settled, and whether it cancelled steps that
-- have dependents of their own (to settle next). SKIP LOCKED: workers share the work. A step
-- one of whose dependents another transaction holds locked (an operator's SELECT ... FOR
-- UPDATE) is left for a later round: waited for, it would hold up every other, round after
-- round, each statement running out of time. `scanned` and `last` say how many steps it looked
-- at and the last of them, to look past a batch of such steps.
-- $1 how many steps at most, $2 whether to record events, $3 only steps of ids above this
WITH unsettled AS MATERIALIZED (
    SELECT id, dependents FROM starlette_jobs
     WHERE dependents IS NOT NULL AND NOT settled
       AND status IN ('succeeded', 'failed', 'cancelled') AND id > $3
     ORDER BY id
     LIMIT $1
       FOR NO KEY UPDATE SKIP LOCKED
), free AS MATERIALIZED (
    SELECT id FROM starlette_jobs
     WHERE id IN (SELECT unnest(dependents) FROM unsettled)
       FOR NO KEY UPDATE SKIP LOCKED
), held AS (
    SELECT id FROM starlette_jobs WHERE id IN (SELECT unnest(dependents) FROM unsettled)
    EXCEPT SELECT id FROM free
), due AS (
    SELECT id FROM unsettled WHERE NOT dependents && ARRAY(SELECT id FROM held)
), written AS (
    UPDATE starlette_jobs AS job SET settled = true FROM due WHERE job.id = due.id
    RETURNING job.id, job.step, job.status, job.dependents
), told AS (
    -- As in record_outcomes.
    SELECT dependent AS id, count(*) AS finished,
           count(*) FILTER (WHERE written.status <> 'succeeded') AS failed,
           array_agg('step ' || written.step || ' (job ' || written.id || ') '
                     || written.status ORDER BY written.id)
               FILTER (WHERE written.status <> 'succeeded') AS causes
      FROM written, unnest(written.dependents) AS dependent
     GROUP BY dependent
),
-- include: release_steps
, released_logged AS (
    INSERT INTO starlette_jobs_events (job_id, kind, status, attempt, error, run_at)
    SELECT id, CASE WHEN status = 'pending' THEN 'ready' ELSE 'cancelled' END, status, attempts,
           CASE WHEN status = 'cancelled' THEN last_error END,
           CASE WHEN status = 'pending' THEN run_at END
      FROM released WHERE status <> 'waiting' AND $2::boolean
), announced AS (
    SELECT pg_notify('starlette_jobs.outcomes', id::text) FROM released
     WHERE outcome_wanted AND status = 'cancelled'
     UNION ALL
    SELECT pg_notify('starlette_jobs:' || queue, '')
      FROM (SELECT DISTINCT queue FROM released WHERE status = 'pending') AS q
)
SELECT (SELECT count(*) FROM written) AS settled,
       (SELECT count(*) FROM released
         WHERE status = 'cancelled' AND dependents IS NOT NULL) > 0 AS cascade,
       (SELECT count(*) FROM announced) AS sent,
       (SELECT count(*) FROM unsettled) AS scanned, (SELECT max(id) FROM unsettled) AS last;

-- name: upstream_results
-- The steps a step waits for: step name, status and result (JSON text), by id.
-- $1 the waiting step's job id
SELECT up.step, up.status, up.result::text AS result
  FROM starlette_jobs AS job
  JOIN starlette_jobs AS up ON up.id = ANY(job.upstream)
 WHERE job.id = $1
 ORDER BY up.id;

-- name: get_workflow
-- $1 workflow id
SELECT id, name, created_at FROM starlette_jobs_workflows WHERE id = $1;

-- name: list_workflows
-- The most recent workflows first (keyset: no OFFSET), each with its steps counted by status:
-- a page of the workflows' primary key, and each one's steps through the index on workflow_id.
-- $1 how many at most, $2 only ids below this one, or NULL
SELECT flow.id, flow.name, flow.created_at, steps.statuses, steps.counts
  FROM (SELECT id, name, created_at FROM starlette_jobs_workflows
         WHERE $2::bigint IS NULL OR id < $2
         ORDER BY id DESC
         LIMIT $1) AS flow,
       LATERAL (SELECT array_agg(status ORDER BY status) AS statuses,
                       array_agg(steps ORDER BY status) AS counts
                  FROM (SELECT status, count(*) AS steps FROM starlette_jobs
                         WHERE workflow_id = flow.id
                         GROUP BY status) AS counted) AS steps
 ORDER BY flow.id DESC;

-- name: workflow_steps
-- The steps of a workflow, in the order they were inserted.
-- $1 workflow id
SELECT * FROM starlette_jobs WHERE workflow_id = $1 ORDER BY id;

-- name: lock_steps
-- The first statement of reopening steps (`reopen_steps`): the rows of these steps, locked in
-- id order, so that the next statement counts what every statement that told them committed.
-- $1 step ids
SELECT id FROM starlette_jobs WHERE id = ANY($1::bigint[]) ORDER BY id FOR NO KEY UPDATE;

-- name: brief_lock_waits
-- For the rest of a bulk retry's batch, which holds many rows already: a lock not granted
-- within 200 ms fails the statement (LockNotAvailable), and the batch is rolled back and run
-- again a moment later. Waiting for as long as it takes could deadlock with a worker's outcome
-- statement (its own row, then the steps waiting for it, among which the batch's), ended only
-- by PostgreSQL's deadlock check a second later; not waiting at all failed every batch while
-- the outcomes of a fan-in's many steps took turns on the row of the step that waits for them.
-- Well under deadlock_timeout (1 s by default): this gives up first.
-- Also before `declare_queues` as a worker starts: a queue's row an operator holds fails it at
-- once, and the worker writes its limits later (worker/_controls.py).
SELECT set_config('lock_timeout', '200ms', true);

-- fragment: upstream_counted
-- `counted`, for each step of a CTE `target` (with an `id`): how many of the steps it waits for
-- have not told it yet (a step counts as finished once it has, `settled`), and how many of
-- those that have did not succeed. Written once for reopen_steps and recount_retried_steps.
counted AS (
    SELECT job.id,
           count(*) FILTER (WHERE NOT (up.settled
                                       AND up.status IN ('succeeded', 'failed', 'cancelled')))
               AS left_to_finish,
           count(*) FILTER (WHERE up.settled AND up.status IN ('failed', 'cancelled')) AS failed
      FROM starlette_jobs AS job
      JOIN target ON target.id = job.id
      JOIN starlette_jobs AS up ON up.id = ANY(job.upstream)
     GROUP BY job.id
)

-- name: reopen_steps
-- `jobs.retry` of a step that failed or was cancelled: of the steps that wait for it (locked
-- by `lock_steps`), those waiting count their upstream again, and those it cancelled (more of
-- their upstream failed than they allow) wait again, with an event `waiting`, unless enough of
-- the others failed to cancel them all the same. An upstream
-- counts as finished once it has told them (`settled`). Returns the steps that waited or were
-- cancelled, whether they were cancelled, and their dependents (to reopen next).
-- $1 step ids, $2 whether to record events
WITH target AS (
    SELECT id, status FROM starlette_jobs
     WHERE id = ANY($1::bigint[])
       AND (status = 'waiting'
            OR (status = 'cancelled' AND upstream_failed > allowed_failures))
),
-- include: upstream_counted
, reopened AS (
    UPDATE starlette_jobs AS job
       SET upstream_left = counted.left_to_finish, upstream_failed = counted.failed,
           status = 'waiting', finished_at = NULL, settled = false,
           last_error = CASE WHEN target.status = 'cancelled' THEN NULL ELSE job.last_error END
      FROM counted JOIN target USING (id)
     WHERE job.id = counted.id
       -- One cancelled because of another step too, that still failed, stays cancelled.
       AND (target.status = 'waiting' OR counted.failed <= job.allowed_failures)
    RETURNING job.id, target.status AS was, job.attempts, job.dependents
), logged AS (
    INSERT INTO starlette_jobs_events (job_id, kind, status, attempt)
    SELECT id, 'waiting', 'waiting', attempts FROM reopened
     WHERE was = 'cancelled' AND $2::boolean
)
SELECT id, was = 'cancelled' AS reopened, dependents FROM reopened;

-- name: cancel_workflow
-- Every step of a workflow not finished yet that no other transaction holds: waiting and
-- pending ones cancelled (their dependents are among them: nothing to tell), running ones
-- asked to stop, their workers told. Returns the ids and statuses after of the steps changed,
-- and how many were `skipped` (locked elsewhere: `PostgresStore.cancel_workflow` runs it again
-- for them). Locked without waiting: waiting for one step while holding others could deadlock
-- with a worker's outcome statement (its own rows, then the steps waiting for them), and no
-- order of locks taken here can match that one, since the statuses this statement sees are
-- those of its snapshot, and a step may be claimed since.
-- $1 workflow id, $2 whether to record events
WITH unfinished AS (
    SELECT id FROM starlette_jobs
     WHERE workflow_id = $1 AND status IN ('waiting', 'pending', 'running')
), target AS (
    SELECT id FROM starlette_jobs
     WHERE id IN (SELECT id FROM unfinished) AND status IN ('waiting', 'pending', 'running')
     ORDER BY id
       FOR NO KEY UPDATE SKIP LOCKED
), changed AS (
    UPDATE starlette_jobs AS job
       SET status = CASE WHEN job.status = 'running' THEN 'running' ELSE 'cancelled' END,
           finished_at = CASE WHEN job.status = 'running' THEN NULL ELSE now() END,
           last_error = CASE WHEN job.status = 'running' THEN job.last_error
                             ELSE 'cancelled: its workflow was cancelled' END,
           cancel_requested_at = CASE WHEN job.status = 'running'
                                      THEN coalesce(job.cancel_requested_at, now()) END,
           settled = job.status <> 'running' AND job.dependents IS NOT NULL
      FROM target
     WHERE job.id = target.id
       AND (job.status <> 'running' OR job.cancel_requested_at IS NULL)
    RETURNING job.id, job.status, job.attempts, job.worker_id, job.lease_token,
              job.outcome_wanted, job.last_error
), logged AS (
    INSERT INTO starlette_jobs_events (job_id, kind, status, attempt, worker_id, error)
    SELECT id, CASE WHEN status = 'running' THEN 'cancel_requested' ELSE 'cancelled' END,
           status, attempts, worker_id, CASE WHEN status = 'cancelled' THEN last_error END
      FROM changed WHERE $2::boolean
), told AS (
    SELECT pg_notify('starlette_jobs.cancel', lease_token::text) FROM changed
     WHERE status = 'running'
     UNION ALL
    SELECT pg_notify('starlette_jobs.outcomes', id::text) FROM changed
     WHERE status = 'cancelled' AND outcome_wanted
)
SELECT (SELECT array_agg(id ORDER BY id) FROM changed) AS ids,
       (SELECT array_agg(status ORDER BY id) FROM changed) AS statuses,
       (SELECT count(*) FROM unfinished WHERE id NOT IN (SELECT id FROM target)) AS skipped,
       (SELECT count(*) FROM told) AS sent;

-- name: workflow_of
-- The workflow a job is a step of (NULL: none), read when a step's result cannot be stored.
-- $1 job id
SELECT workflow_id FROM starlette_jobs WHERE id = $1;

-- Steps a running step adds to its workflow (docs/workflows.md, `Store.add_steps`), in one
-- transaction: lock_step_workflow, lock_adding_step, steps_named, then add_steps. The
-- workflow's row is locked before the step's, as cancel_workflow locks them: no deadlock.

-- name: lock_step_workflow
-- lock_workflow, for the workflow of a job (its workflow_id is set once, at its insert);
-- nothing for a job of no workflow.
-- $1 job id
SELECT id FROM starlette_jobs_workflows
 WHERE id = (SELECT workflow_id FROM starlette_jobs WHERE id = $1)
   FOR NO KEY UPDATE;

-- name: lock_adding_step
-- The running step's row, only while this attempt holds its lease and was not asked to stop
-- (a cancel of it, or of its workflow), locked until the transaction ends: its outcome, a
-- rescue or a cancel of it waits for the steps it adds, and the steps waiting for it (which
-- wait for it to finish) cannot be released meanwhile. Returns its workflow id (NULL: a job of
-- no workflow); no row: the lease is lost, or the step asked to stop.
-- $1 job id, $2 lease token
SELECT workflow_id FROM starlette_jobs
 WHERE id = $1 AND lease_token = $2 AND status = 'running' AND cancel_requested_at IS NULL
   FOR NO KEY UPDATE;

-- name: lock_workflow
-- The workflow's row, locked until the transaction ends: steps added to one workflow from
-- two running steps take turns, so that a step name stays unique in it, and a cancel of the
-- workflow comes before an addition (which then finds its step asked to stop) or after it
-- (and cancels the steps added).
-- $1 workflow id
SELECT id FROM starlette_jobs_workflows WHERE id = $1 FOR NO KEY UPDATE;

-- name: steps_named
-- The steps of a workflow of these names: id, step name, job name, payload (JSON text).
-- $1 workflow id, $2 step names
SELECT id, step, name, payload::text AS payload FROM starlette_jobs
 WHERE workflow_id = $1 AND step = ANY($2::text[]);

-- name: add_steps
-- Inserts steps into the workflow of a running step (locked by lock_adding_step), between it
-- and the steps waiting for it: each waits for those given it waits for, and is waited for by
-- the running step's dependents, whose rows (locked in id order, as record_outcomes locks
-- them) count them in the same statement: no window in which a dependent could be released
-- without them. A dependent that runs whatever the outcomes (allowed_failures = all it waits
-- for) still does. The steps' trace context is the running step's. Returns the steps' ids.
-- $1 the running step's job id, $2 workflow id, $3 step names, $4 job names, $5 queues,
-- $6 payloads (one JSON array, an element per step), $7 priorities, $8 max_attempts,
-- $9 allowed failures, $10 and $11 the edges between them: the position (from 1) of a step
-- waited for, and of the step that waits for it
WITH running AS (
    SELECT trace_context, coalesce(dependents, '{}') AS dependents
      FROM starlette_jobs WHERE id = $1
), step AS (
    SELECT given.position, nextval(pg_get_serial_sequence('starlette_jobs', 'id')) AS id,
           given.step, given.name, given.queue, given.priority, given.max_attempts,
           given.allowed_failures
      FROM unnest($3::text[], $4::text[], $5::text[], $7::int4[], $8::int4[], $9::int4[])
           WITH ORDINALITY AS given(step, name, queue, priority, max_attempts,
                                    allowed_failures, position)
     ORDER BY given.position
), ids AS (
    SELECT array_agg(id ORDER BY position) AS ids FROM step
), edge AS (
    SELECT ids.ids[edge.up] AS upstream_id, ids.ids[edge.down] AS job_id
      FROM unnest($10::int4[], $11::int4[]) AS edge(up, down), ids
), waits AS (
    SELECT job_id AS id, array_agg(upstream_id ORDER BY upstream_id) AS upstream
      FROM edge GROUP BY job_id
), waited AS (
    SELECT upstream_id AS id, array_agg(job_id ORDER BY job_id) AS dependents
      FROM edge GROUP BY upstream_id
), inserted AS (
    INSERT INTO starlette_jobs
        (id, name, queue, payload, priority, max_attempts, trace_context, created_at, run_at,
         status, workflow_id, step, upstream, dependents, upstream_left, upstream_failed,
         allowed_failures)
    OVERRIDING SYSTEM VALUE
    SELECT step.id, step.name, step.queue, $6::jsonb -> (step.position - 1)::int,
           step.priority, step.max_attempts, running.trace_context, statement_timestamp(),
           statement_timestamp(),
           CASE WHEN waits.upstream IS NULL THEN 'pending' ELSE 'waiting' END,
           $2, step.step, waits.upstream,
           nullif(ARRAY(SELECT d FROM unnest(coalesce(waited.dependents, '{}')
                                               || running.dependents) AS d ORDER BY d), '{}'),
           cardinality(waits.upstream), CASE WHEN waits.upstream IS NOT NULL THEN 0 END,
           step.allowed_failures
      FROM step CROSS JOIN running LEFT JOIN waits USING (id) LEFT JOIN waited USING (id)
     ORDER BY step.position
    RETURNING queue, status
), locked AS (
    SELECT job.id FROM starlette_jobs AS job
     WHERE job.id = ANY(ARRAY(SELECT unnest(dependents) FROM running))
     ORDER BY job.id
       FOR NO KEY UPDATE
), extended AS (
    -- The added ids are newer than any it waited for: `upstream` stays in id order.
    UPDATE starlette_jobs AS job
       SET upstream = job.upstream || ids.ids,
           upstream_left = job.upstream_left
                           + CASE WHEN job.status = 'waiting' THEN cardinality(ids.ids)
                                  ELSE 0 END,
           allowed_failures = job.allowed_failures
                              + CASE WHEN job.allowed_failures = cardinality(job.upstream)
                                     THEN cardinality(ids.ids) ELSE 0 END
      FROM ids
     WHERE job.id IN (SELECT id FROM locked)
    RETURNING job.id
), woken AS (
    SELECT pg_notify('starlette_jobs:' || queue, '')
      FROM (SELECT DISTINCT queue FROM inserted WHERE status = 'pending') AS q
)
SELECT (SELECT ids FROM ids) AS ids, (SELECT count(*) FROM extended) AS extended,
       (SELECT count(*) FROM woken) AS sent;

-- name: begin_bulk
-- The record of a bulk action (docs/dashboard.md, "Bulk actions"), unfinished: how many jobs
-- it applies to now, and the highest job id now (jobs enqueued later are left out).
-- $1 action, $2 who asked or NULL, $3 queue, $4 the filter's status or NULL, $5 job name or
-- NULL, $6 the statuses the action changes (narrowed to $4), $7 finished at or after, or NULL
INSERT INTO starlette_jobs_bulk_actions
       (action, by_whom, queue, status, name, matched, upper_id, finished_after)
SELECT $1, $2, $3, $4, $5,
       (SELECT count(*) FROM starlette_jobs
         WHERE queue = $3 AND status = ANY($6::text[]) AND ($5::text IS NULL OR name = $5)
           AND ($7::timestamptz IS NULL OR finished_at >= $7)
           -- A running job asked to stop already: a cancel leaves it.
           AND NOT ($1 = 'cancel' AND cancel_requested_at IS NOT NULL)
           -- A step more of whose upstream failed than it allows: a retry leaves it (see
           -- bulk_retry_batch).
           AND NOT ($1 = 'retry' AND upstream IS NOT NULL
                    AND (SELECT count(*) FROM starlette_jobs AS up
                          WHERE up.id = ANY(starlette_jobs.upstream) AND up.settled
                            AND up.status IN ('failed', 'cancelled')) > allowed_failures)),
       (SELECT coalesce(max(id), 0) FROM starlette_jobs), $7
RETURNING *;

-- fragment: bulk_advanced
-- A bulk action's batch (bulk_retry_batch, bulk_cancel_batch): its record advanced by the
-- count of the jobs `changed`, past those it `picked` up to the first it `skipped` (locked
-- elsewhere: the next batch picks it again), and finished when the batch was not full and
-- skipped none.
advanced AS (
    UPDATE starlette_jobs_bulk_actions AS record
       SET done = record.done + (SELECT count(*) FROM changed),
           last_id = coalesce((SELECT min(id) - 1 FROM skipped), (SELECT max(id) FROM picked),
                              record.last_id),
           finished_at = CASE WHEN (SELECT count(*) FROM picked) < $2
                               AND NOT EXISTS (SELECT 1 FROM skipped) THEN now() END
      FROM bulk
     WHERE record.id = bulk.id
    RETURNING record.*
)

-- name: bulk_retry_batch
-- One batch of a bulk retry: the next $2 failed or cancelled jobs of its filter, by id after
-- `last_id`, run again from their first attempt (as retry_job), their events naming who asked,
-- and the record advanced, in one statement. A job whose unique key a live job holds, or
-- another of the batch (the latest of them is retried), is left as it is. Returns the record
-- after, the steps waiting for the jobs retried (`dependents`, to reopen in the same
-- transaction), or nothing if the record has finished or is no retry.
-- $1 bulk id, $2 batch size, $3 whether to record events
WITH bulk AS (
    SELECT * FROM starlette_jobs_bulk_actions
     WHERE id = $1 AND action = 'retry' AND finished_at IS NULL
       FOR UPDATE
), picked AS (
    SELECT job.id, job.unique_key
      FROM starlette_jobs AS job, bulk
     WHERE job.queue = bulk.queue AND job.status IN ('failed', 'cancelled')
       -- One that finished after the action began was not counted in `matched`, nor seen by
       -- who asked: left out, as a job enqueued since is.
       AND job.finished_at <= bulk.started_at
       AND (bulk.status IS NULL OR job.status = bulk.status)
       AND (bulk.name IS NULL OR job.name = bulk.name)
       AND (bulk.finished_after IS NULL OR job.finished_at >= bulk.finished_after)
       AND job.id > bulk.last_id AND job.id <= bulk.upper_id
       -- A step more of whose upstream failed than it allows is left (as by retry_job): run
       -- beside that step, it would find it unfinished and fail for good. The retry of that
       -- step (here or later) puts one it cancelled back to waiting (`reopen_steps`), and it
       -- runs after it. The failures counted now: one cancelled by hand while it waited was
       -- not told of those after.
       AND NOT (job.upstream IS NOT NULL
                AND (SELECT count(*) FROM starlette_jobs AS up
                      WHERE up.id = ANY(job.upstream) AND up.settled
                        AND up.status IN ('failed', 'cancelled')) > job.allowed_failures)
       -- One whose unique key a live job holds stays as it is: not picked at all, so that a
       -- batch that starts again at a row it skipped (`bulk_advanced`) is not filled with
       -- these, and reaches the jobs after them.
       AND NOT (job.unique_key IS NOT NULL
                AND EXISTS (SELECT FROM starlette_jobs AS live
                             WHERE live.unique_key = job.unique_key
                               AND live.status IN ('pending', 'running')))
     ORDER BY job.id
     LIMIT $2
), allowed AS (
    SELECT p.id FROM picked AS p
     WHERE p.unique_key IS NULL
        OR (p.id = (SELECT max(o.id) FROM picked AS o WHERE o.unique_key = p.unique_key)
            AND NOT EXISTS (SELECT 1 FROM starlette_jobs AS live
                             WHERE live.unique_key = p.unique_key
                               AND live.status IN ('pending', 'running')))
), target AS (
    -- Locked without waiting: a job another transaction holds (an operator's session, a
    -- step being told) is skipped, and picked again by the next batch (`bulk_advanced`).
    SELECT id FROM starlette_jobs
     WHERE id IN (SELECT id FROM allowed) AND status IN ('failed', 'cancelled')
     ORDER BY id
       FOR NO KEY UPDATE SKIP LOCKED
), skipped AS (
    SELECT id FROM allowed WHERE id NOT IN (SELECT id FROM target)
), changed AS (
    UPDATE starlette_jobs AS job
       SET status = 'pending', attempts = 0, run_at = now(), finished_at = NULL, result = NULL,
           progress = NULL, cancel_requested_at = NULL, outcome_wanted = false, settled = false
      FROM target
     WHERE job.id = target.id
    RETURNING job.id, job.status, job.attempts, job.run_at, job.dependents,
              job.upstream IS NOT NULL AS waits
), logged AS (
    -- A workflow's step that waits for others is told by `recount_retried_steps`, which
    -- knows whether it waits again.
    INSERT INTO starlette_jobs_events (job_id, kind, status, attempt, run_at, actor)
    SELECT changed.id, 'retried', changed.status, changed.attempts, changed.run_at, bulk.by_whom
      FROM changed, bulk WHERE $3::boolean AND NOT changed.waits
),
-- include: bulk_advanced
SELECT advanced.*,
       (SELECT array_agg(step) FROM changed, unnest(changed.dependents) AS step) AS dependents,
       (SELECT array_agg(id ORDER BY id) FROM changed WHERE waits) AS waiting_steps,
       CASE WHEN EXISTS (SELECT 1 FROM changed)
            THEN pg_notify('starlette_jobs:' || advanced.queue, '') END
  FROM advanced;

-- name: recount_retried_steps
-- The steps a bulk retry's batch ran again that wait for other steps, in the batch's
-- transaction (which holds their rows since its update): as `retry_job`, each waits again for
-- those of its upstream that have not finished (one cancelled while it waited), else stays
-- pending; the event `retried` says which. Counted in this statement's snapshot, taken after
-- the lock: it sees every statement that told them before it, and one after waits for the lock.
-- $1 step ids, $2 whether to record events, $3 who asked (the event's actor) or NULL
WITH target AS (
    SELECT unnest($1::bigint[]) AS id
),
-- include: upstream_counted
, recounted AS (
    -- One more of whose upstream failed than it allows since the batch chose it (the batch
    -- leaves those out) is cancelled by that failure, as if it had waited: its retry reopens it.
    UPDATE starlette_jobs AS job
       SET status = CASE WHEN counted.failed > job.allowed_failures THEN 'cancelled'
                         WHEN counted.left_to_finish > 0 THEN 'waiting'
                         ELSE 'pending' END,
           upstream_left = counted.left_to_finish,
           upstream_failed = counted.failed,
           finished_at = CASE WHEN counted.failed > job.allowed_failures THEN now() END,
           last_error = CASE WHEN counted.failed > job.allowed_failures
                             THEN 'cancelled: a step it waits for did not succeed'
                             ELSE job.last_error END
      FROM counted
     WHERE job.id = counted.id
    RETURNING job.id, job.status, job.attempts, job.run_at
)
INSERT INTO starlette_jobs_events (job_id, kind, status, attempt, run_at, actor)
SELECT id, 'retried', status, attempts, run_at, $3::text FROM recounted WHERE $2::boolean;

-- name: bulk_cancel_batch
-- One batch of a bulk cancel: the next $2 pending, waiting or running jobs of its filter, by id
-- after `last_id`, cancelled or asked to stop (as cancel_job), their events naming who asked,
-- and the record advanced, in one statement. Returns the record after, and `owed`: a step
-- cancelled has steps waiting for it (`settle_steps`); nothing if the record has finished or
-- is no cancel.
-- $1 bulk id, $2 batch size, $3 whether to record events
WITH bulk AS (
    SELECT * FROM starlette_jobs_bulk_actions
     WHERE id = $1 AND action = 'cancel' AND finished_at IS NULL
       FOR UPDATE
), picked AS (
    SELECT job.id
      FROM starlette_jobs AS job, bulk
     WHERE job.queue = bulk.queue AND job.status IN ('pending', 'waiting', 'running')
       AND job.cancel_requested_at IS NULL
       AND (bulk.status IS NULL OR job.status = bulk.status)
       AND (bulk.name IS NULL OR job.name = bulk.name)
       AND (bulk.finished_after IS NULL OR job.finished_at >= bulk.finished_after)
       AND job.id > bulk.last_id AND job.id <= bulk.upper_id
     ORDER BY job.id
     LIMIT $2
), target AS (
    -- Locked without waiting: a job another transaction holds is skipped, and picked again by
    -- the next batch (`bulk_advanced`). Waiting for it while holding the others could
    -- deadlock with a worker's outcome statement, which locks its own rows and then the steps
    -- waiting for them: no order of locks taken here can match that one, since the statuses
    -- this statement sees are those of its snapshot, and a job may be claimed since.
    SELECT id FROM starlette_jobs
     WHERE id IN (SELECT id FROM picked) AND status IN ('pending', 'waiting', 'running')
     ORDER BY id
       FOR NO KEY UPDATE SKIP LOCKED
), skipped AS (
    SELECT id FROM picked WHERE id NOT IN (SELECT id FROM target)
), changed AS (
    UPDATE starlette_jobs AS job
       SET status = CASE WHEN job.status IN ('pending', 'waiting') THEN 'cancelled'
                         ELSE job.status END,
           finished_at = CASE WHEN job.status IN ('pending', 'waiting') THEN now()
                              ELSE job.finished_at END,
           cancel_requested_at = CASE WHEN job.status = 'running' THEN now() END
      FROM target
     WHERE job.id = target.id
       AND (job.status IN ('pending', 'waiting')
            OR (job.status = 'running' AND job.cancel_requested_at IS NULL))
    RETURNING job.id, job.status, job.attempts, job.worker_id, job.lease_token,
              job.outcome_wanted, job.dependents
), logged AS (
    INSERT INTO starlette_jobs_events (job_id, kind, status, attempt, worker_id, actor)
    SELECT changed.id,
           CASE WHEN changed.status = 'running' THEN 'cancel_requested' ELSE 'cancelled' END,
           changed.status, changed.attempts, changed.worker_id, bulk.by_whom
      FROM changed, bulk WHERE $3::boolean
), notified AS (
    SELECT CASE WHEN status = 'running'
                THEN pg_notify('starlette_jobs.cancel', lease_token::text)
                WHEN outcome_wanted THEN pg_notify('starlette_jobs.outcomes', id::text) END
      FROM changed
),
-- include: bulk_advanced
SELECT advanced.*, (SELECT count(*) FROM notified) AS sent,
       EXISTS (SELECT 1 FROM changed WHERE status = 'cancelled' AND dependents IS NOT NULL)
           AS owed
  FROM advanced;

-- name: get_bulk
-- $1 bulk id
SELECT * FROM starlette_jobs_bulk_actions WHERE id = $1;

-- name: list_bulks
-- The latest bulk actions, latest first. $1 how many at most
SELECT * FROM starlette_jobs_bulk_actions ORDER BY id DESC LIMIT $1;

-- name: finished_since
-- The ids of up to $2 jobs finished at or after $1 (with ids below $3, if given), read on
-- starlette_jobs_finished_idx (its order and the LIMIT keep the planner on it): fewer than $2
-- back, they are every job the bound matches on this page and after, and the list is drawn
-- from them (`list_jobs_among`); else the bound is wide and the list scans by id
-- (`list_finished_jobs`). Oldest finished first: those tend to have the lowest ids, the ones
-- below $3, so a page well inside a wide bound finds $2 of them at once.
-- $1 finished at or after, $2 how many at most, $3 only ids below this one, or NULL, $4 only
-- ids above this one, or NULL
SELECT id FROM starlette_jobs
 WHERE status IN ('succeeded', 'failed', 'cancelled') AND finished_at >= $1
   AND ($3::bigint IS NULL OR id < $3) AND ($4::bigint IS NULL OR id > $4)
 ORDER BY finished_at
 LIMIT $2;

-- name: list_jobs_among
-- list_jobs among the jobs of $9 (the few `finished_since` found).
-- $1 status or NULL, $2 queue or NULL, $3 how many at most, $4 job name or NULL, $5 only ids
-- below this one, or NULL, $6 trace id or NULL, $7 correlation id or NULL, $8 only ids above
-- this one, or NULL (as in list_jobs), $9 the ids
SELECT * FROM starlette_jobs
 WHERE id = ANY($9::bigint[]) AND ($8::bigint IS NULL OR id > $8)
   AND ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR queue = $2)
   AND ($4::text IS NULL OR name = $4) AND ($5::bigint IS NULL OR id < $5)
   AND ($6::text IS NULL OR substr(trace_context->>'traceparent', 4, 32) = $6)
   AND ($7::text IS NULL OR trace_context->>'x-request-id' = $7)
 ORDER BY id DESC
 LIMIT $3;

-- name: list_finished_jobs
-- list_jobs of the jobs finished at or after $9 (a wide bound: `finished_since`).
-- $1 status or NULL, $2 queue or NULL, $3 how many at most, $4 job name or NULL, $5 only ids
-- below this one, or NULL, $6 trace id or NULL, $7 correlation id or NULL, $8 only ids above
-- this one, or NULL (as in list_jobs), $9 finished at or after
SELECT * FROM starlette_jobs
 WHERE status IN ('succeeded', 'failed', 'cancelled') AND finished_at >= $9
   AND ($8::bigint IS NULL OR id > $8)
   AND ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR queue = $2)
   AND ($4::text IS NULL OR name = $4) AND ($5::bigint IS NULL OR id < $5)
   AND ($6::text IS NULL OR substr(trace_context->>'traceparent', 4, 32) = $6)
   AND ($7::text IS NULL OR trace_context->>'x-request-id' = $7)
 ORDER BY id DESC
 LIMIT $3;

-- name: prune_bulks
-- Deletes the bulk actions' records that finished more than $1 seconds ago (the jobs'
-- retention); returns how many. One that has not finished is kept: it can be run on.
-- $1 retention in seconds
WITH deleted AS (
    DELETE FROM starlette_jobs_bulk_actions
     WHERE finished_at < now() - make_interval(secs => $1)
    RETURNING id
)
SELECT count(*) FROM deleted;

-- name: add_throughput
-- A worker's counts of the attempts it ended, added to those kept per queue and minute (other
-- workers' included), and the minutes older than $6 deleted in the same statement: the table
-- stays a few rows per queue. The rows added are never older than those deleted (the same
-- now()), so no row is both. The worker sends them sorted by queue and minute, so that two
-- workers adding the same minutes lock them in the same order.
-- $1 queues, $2 minutes, $3 succeeded, $4 failed, $5 retried (one element per queue and
-- minute), $6 how many minutes are kept
WITH pruned AS (
    DELETE FROM starlette_jobs_throughput
     WHERE minute < now() - $6::int4 * interval '1 minute'
)
INSERT INTO starlette_jobs_throughput AS kept (queue, minute, succeeded, failed, retried)
SELECT added.queue, added.minute, added.succeeded, added.failed, added.retried
  FROM unnest($1::text[], $2::timestamptz[], $3::int8[], $4::int8[], $5::int8[])
           AS added (queue, minute, succeeded, failed, retried)
 WHERE added.minute >= now() - $6::int4 * interval '1 minute'
ON CONFLICT (queue, minute) DO UPDATE
   SET succeeded = kept.succeeded + EXCLUDED.succeeded,
       failed = kept.failed + EXCLUDED.failed,
       retried = kept.retried + EXCLUDED.retried;

-- name: throughput
-- The kept minutes from $1 on, of the queue $2 or of all (null): at most an hour of rows per
-- queue.
SELECT queue, minute, succeeded, failed, retried FROM starlette_jobs_throughput
 WHERE minute >= $1 AND ($2::text IS NULL OR queue = $2)
 ORDER BY queue, minute;
