"""Steps a running workflow's step adds to its workflow, on PostgreSQL (docs/workflows.md):
one transaction that locks its workflow's row (two steps adding to one workflow take turns,
names stay unique; a cancel of the workflow comes before or after), then the step's row under
its lease token (its outcome waits), reads the steps already of the names given, and inserts
the others, counted by the step's dependents in the same statement (sql/queries.sql,
`add_steps`). `_store.PostgresStore` is built on it."""

from __future__ import annotations

from uuid import UUID

from .._errors import StepNotRunningError, WorkflowDefinitionError
from .._workflow_records import EnqueuedWorkflow, NewWorkflow, split_added
from ._connected import ConnectedStore
from ._driver_errors import raise_as_store_error


class AddedStepStatements(ConnectedStore):
    """`ConnectedStore` with the protocol's `add_steps`."""

    async def add_steps(self, job_id: int, lease_token: UUID, new: NewWorkflow) -> EnqueuedWorkflow:
        try:
            async with self._shared.transaction() as connection:
                await connection.execute(self._q["lock_step_workflow"], job_id)
                running = await connection.fetchrow(
                    self._q["lock_adding_step"], job_id, lease_token
                )
                if running is None:
                    raise StepNotRunningError(
                        f"job {job_id}: this attempt no longer holds the job's lease, or was "
                        "asked to stop; no step added"
                    )
                workflow_id: int | None = running["workflow_id"]
                if workflow_id is None:
                    raise WorkflowDefinitionError(
                        f"job {job_id} is not a workflow's step: only a step can add steps to "
                        "its workflow"
                    )
                rows = await connection.fetch(self._q["steps_named"], workflow_id, list(new.steps))
                existing = {row["step"]: (row["id"], row["name"], row["payload"]) for row in rows}
                steps, kept = split_added(new.step_records(), workflow_id, existing)
                if not steps:
                    return EnqueuedWorkflow(workflow_id, kept)
                edges = [(up + 1, down + 1) for down, s in enumerate(steps) for up in s.upstream]
                row = await connection.fetchrow(
                    self._q["add_steps"],
                    job_id,
                    workflow_id,
                    [s.step for s in steps],
                    [s.name for s in steps],
                    [s.queue for s in steps],
                    f"[{','.join(s.payload for s in steps)}]",
                    [s.priority for s in steps],
                    [s.max_attempts for s in steps],
                    [s.allowed_failures for s in steps],
                    [up for up, _ in edges],
                    [down for _, down in edges],
                )
                assert row is not None
                ids = dict(zip((s.step for s in steps), row["ids"], strict=True))
                return EnqueuedWorkflow(workflow_id, {**kept, **ids})
        except (StepNotRunningError, WorkflowDefinitionError):
            raise
        except Exception as error:
            raise_as_store_error(error, schema=self.schema)
