"""`AddedSteps`: steps a running workflow's step adds to its own workflow (docs/workflows.md),
as `current_job().extend_workflow()` returns them: a fan-out over a list the step has just
fetched.

The steps are declared and checked as a `Workflow`'s are (arguments as each is added; names,
unknown steps and cycles before anything is written), and may wait for each other only. They
are written at once, in one transaction, while the step that adds them still holds its lease:
each joins the graph between that step and the steps waiting for it, which then wait for the
added steps too, and read their results. A step name is unique in a workflow: a step added
again under its name, running the same job with the same arguments (the step that adds it
retried), is the one already there, and is not added twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ._errors import WorkflowDefinitionError
from ._job import HasEnqueuer
from ._workflow_records import EnqueuedWorkflow, NewWorkflow
from ._workflows import Workflow

if TYPE_CHECKING:
    from .postgres._transactions import CallerTransaction

StepAdder = Callable[[NewWorkflow], Awaitable[EnqueuedWorkflow]]
"""`Store.add_steps` for the running step and its lease token, as the worker hands it over."""


class AddedSteps(Workflow):
    """Steps to add to the workflow of the step running now; see the module's docstring.

    Example:
        >>> @job
        ... async def fetch_orders(day: str) -> int:
        ...     orders = await list_orders(day)
        ...     more = current_job().extend_workflow()
        ...     more.add_many("order", bill_order, [{"order_id": o} for o in orders])
        ...     await more.enqueue()
        ...     return len(orders)
    """

    def __init__(self, job_id: int, add: StepAdder | None) -> None:
        super().__init__(f"steps added by job {job_id}")
        self.job_id = job_id
        self._add_steps = add

    async def enqueue(
        self, *, connection: CallerTransaction | None = None, jobs: HasEnqueuer | None = None
    ) -> EnqueuedWorkflow:
        """Checks the steps, then adds them to the running step's workflow, in one
        transaction; returns the workflow's id and the job id of each step given (that of the
        step already there, for one added again with the same job and arguments).

        Raises:
            WorkflowDefinitionError: a step waits for one not added with it, steps wait for
                each other in a cycle, the job is not a workflow's step or runs outside a
                worker, or a step name is taken in the workflow by another job or other
                arguments; nothing is written.
            StepNotRunningError: the attempt no longer holds its job's lease (another worker
                may run it now); nothing is written.
            TypeError: `connection` or `jobs` given: the steps are written by the worker
                running this step, in a transaction of their own.
        """
        if connection is not None or jobs is not None:
            raise TypeError(
                "extend_workflow().enqueue() takes neither connection= nor jobs=: the steps are "
                "written through the worker running the step, in a transaction of their own"
            )
        new = self._new_workflow(None)  # checked before anything else, even the database
        if self._add_steps is None:
            raise WorkflowDefinitionError(
                f"job {self.job_id} runs outside a worker: it has no workflow to add steps to"
            )
        return await self._add_steps(new)
