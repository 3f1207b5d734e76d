"""`WorkflowQueries`: the part of `Jobs` that looks at workflows (`jobs.workflow(id)`), over
whatever `Store` the `Jobs` it belongs to has started (docs/workflows.md)."""

from __future__ import annotations

from ._errors import unavailable_as_error
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
        if isinstance(workflow_id, bool) or not isinstance(workflow_id, int):
            return None
        if not 1 <= workflow_id <= 2**63 - 1:
            return None
        with unavailable_as_error(f"get workflow {workflow_id}"):
            return await self._ready_store.get_workflow(workflow_id)

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
        if before is not None and (type(before) is not int or not 1 <= before <= 2**63 - 1):
            raise ValueError(f"before must be a workflow id, got {before!r}")
        with unavailable_as_error("list workflows"):
            return await self._ready_store.list_workflows(limit, before)

    async def cancel_workflow(self, workflow_id: int) -> int:
        """Cancels every step of the workflow that has not finished: waiting and pending ones
        at once, running ones as `cancel` does (their worker stops them, and they end
        `cancelled`). Returns how many steps it cancelled or asked to stop.

        Example:
            >>> await jobs.cancel_workflow(enqueued.id)
        """
        with unavailable_as_error(f"cancel workflow {workflow_id}"):
            return len(await self._ready_store.cancel_workflow(workflow_id))
