-- starlette-jobs 0016: the schedules each worker's code declares, in the registry
-- (docs/schedules.md, "Deploys").

-- Each schedule's name and the hash of its definition, as the worker's code declares them: a
-- worker whose definitions the database does not hold stands by while a live worker's code
-- holds the stored ones, and declares its own again once none does.
ALTER TABLE starlette_jobs_workers ADD COLUMN schedules jsonb NOT NULL DEFAULT '{}';
