-- starlette-jobs 0018: the workflows that still have steps to run, for retention
-- (docs/workflows.md, "Retention").

-- Retention keeps every step of a workflow while any step of it is unfinished: the
-- workflow's page and `jobs.workflow` show it whole until it ends. `prune_finished` asks this
-- index about the workflow of each finished step it looks at. Only unfinished steps are in
-- it: a job of no workflow, and a finished step, costs nothing more.
CREATE INDEX starlette_jobs_unfinished_steps_idx
    ON starlette_jobs (workflow_id)
    WHERE workflow_id IS NOT NULL AND status IN ('pending', 'waiting', 'running');
