-- starlette-jobs 0005: no CHECK constraints on the jobs table.

-- PostgreSQL prepares a table's CHECK expressions afresh for every statement that writes it,
-- before the first row: these four cost 10 us a statement (measured on PostgreSQL 15), a third
-- of the server's work for a single enqueue and 3 us a job for a drain claiming 10 at a time.
-- Only starlette-jobs' own statements (queries.sql) write the table, and what the constraints
-- held (a known status, attempts >= 0, max_attempts >= 1, a lease exactly while running) is what
-- those statements write; the contract suite holds both stores to it.
-- Dropping a constraint only changes the catalog: instant whatever the table holds, once the
-- table is free (a migration waits at most MIGRATION_LOCK_WAIT for it: postgres/_migrations.py).
ALTER TABLE starlette_jobs
    DROP CONSTRAINT IF EXISTS starlette_jobs_status_check,
    DROP CONSTRAINT IF EXISTS starlette_jobs_attempts_check,
    DROP CONSTRAINT IF EXISTS starlette_jobs_max_attempts_check,
    DROP CONSTRAINT IF EXISTS starlette_jobs_running_has_lease_check;
