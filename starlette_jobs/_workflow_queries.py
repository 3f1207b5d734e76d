"""`WorkflowQueries`: the part of `Jobs` that looks at workflows (`jobs.workflow(id)`), over
whatever `Store` the `Jobs` it belongs to has started (docs/workflows.md)."""

from __future__ import annotations

from ._errors import unavailable_as_error
from ._row_ids import MAX_ROW_ID, row_id_of
from ._workflow_records import WorkflowRecord, WorkflowSummary
from .store._protocol import Store


class WorkflowQueries:
    """The part of `Jobs` that looks at workflows; `Jobs` supplies `_ready_store`."""

    @property
    def _ready_store(self) -> Store:
        raise NotImplementedError

    async def workflow(self, workflow_id: int) -> WorkflowRecord | None:
        """The workflow with this id (what `Workflow.enqueue` returned as `.id`) and its steps:
        each step's job (status, result, errors) and the steps it waits for; None if there is
        no such workflow.

        Example:
            >>> flow = await jobs.workflow(enqueued.id)
            >>> flow.statuses
            {'render': <JobStatus.SUCCEEDED: 'succeeded'>, 'send': <JobStatus.PENDING: 'pending'>}
        """
        return await self._workflow(workflow_id, brief=False)

    async def _workflow(self, workflow_id: int, *, brief: bool) -> WorkflowRecord | None:
        """`workflow`; `brief`: each step's job without its large fields (`Store.list_jobs`),
        for the dashboard's pages, which show a line of each."""
        row_id = row_id_of(workflow_id)
        if row_id is None:  # no workflow can have it
            return None
        with unavailable_as_error(f"get workflow {row_id}"):
            return await self._ready_store.get_workflow(row_id, brief=brief)

    async def workflows(
        self, *, limit: int = 50, before: int | None = None
    ) -> list[WorkflowSummary]:
        """The most recent workflows first, each with its steps counted by status (not read:
        `jobs.workflow(id)` reads them). `before`: the next page, after one whose last
        (oldest) workflow had this id.

        Raises:
            ValueError: a `limit` outside 1 to 1,000, a `before` that is no workflow id.

        Example:
            >>> [(flow.name, flow.steps) for flow in await jobs.workflows(limit=2)]
            [('onboarding', {<JobStatus.SUCCEEDED: 'succeeded'>: 3})]
        """
        if type(limit) is not int or not 1 <= limit <= 1000:
            raise ValueError(f"limit must be an integer from 1 to 1000, got {limit!r}")
        if before is not None and (type(before) is not int or not 1 <= before <= MAX_ROW_ID):
            raise ValueError(f"before must be a workflow id, got {before!r}")
        with unavailable_as_error("list workflows"):
            return await self._ready_store.list_workflows(limit, before)

    async def cancel_workflow(self, workflow_id: int) -> int:
        """Cancels every step of the workflow that has not finished: waiting and pending ones
        at once, running ones as `cancel` does (their worker stops them, and they end
        `cancelled`). Returns how many steps it cancelled or asked to stop: 0 for an id that
        names no workflow.

        Example:
            >>> await jobs.cancel_workflow(enqueued.id)
        """
        row_id = row_id_of(workflow_id)
        if row_id is None:  # no workflow can have it
            return 0
        with unavailable_as_error(f"cancel workflow {row_id}"):
            return len(await self._ready_store.cancel_workflow(row_id))
