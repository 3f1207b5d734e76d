"""`WorkflowQueries`: the part of `Jobs` that looks at workflows (`jobs.workflow(id)`), over
whatever `Store` the `Jobs` it belongs to has started (docs/workflows.md)."""

from __future__ import annotations

from ._errors import unavailable_as_error
from ._workflow_records import WorkflowRecord
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

    async def cancel_workflow(self, workflow_id: int) -> int:
        """Cancels every step of the workflow that has not finished: waiting and pending ones
        at once, running ones as `cancel` does (their worker stops them, and they end
        `cancelled`). Returns how many steps it cancelled or asked to stop.

        Example:
            >>> await jobs.cancel_workflow(enqueued.id)
        """
        with unavailable_as_error(f"cancel workflow {workflow_id}"):
            return len(await self._ready_store.cancel_workflow(workflow_id))
