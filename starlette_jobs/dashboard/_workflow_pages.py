"""What the workflow pages show beyond `jobs.workflows()` and `jobs.workflow(id)`: the id in a
path or a `before=`, checked, and each step's dependents (the steps that wait for it), the
other direction of the graph from the `waits_for` each step holds."""

from __future__ import annotations

from .._records import JobStatus
from .._workflow_records import WorkflowRecord, WorkflowSummary
from ._listing import row_id


def workflow_id(text: str | None, field: str) -> int | None:
    """The workflow id in `text` (digits only), or None for no text.

    Raises:
        FilterError: text that no workflow id can be.
    """
    return row_id(text, field, "workflow")


def dependents(workflow: WorkflowRecord) -> dict[str, list[str]]:
    """Each step's name -> the steps that wait for it, in the workflow's order."""
    waited_by: dict[str, list[str]] = {step.step: [] for step in workflow.steps}
    for step in workflow.steps:
        for upstream in step.waits_for:
            waited_by.setdefault(upstream, []).append(step.step)
    return waited_by


def in_order(summary: WorkflowSummary) -> list[tuple[JobStatus, int]]:
    """Its steps' counts, in the order of `JobStatus` (the list's columns read alike)."""
    return [(status, summary.steps[status]) for status in JobStatus if status in summary.steps]
