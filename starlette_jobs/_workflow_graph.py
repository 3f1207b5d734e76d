"""A workflow's graph checked and put in an order the store can write (docs/workflows.md):
each step after the steps it waits for, and how many of those may fail for it still to run.
Pure: `Workflow` (`_workflows.py`) collects the steps, this orders them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ._errors import WorkflowDefinitionError
from ._workflow_records import NewWorkflow, StepJob


@dataclass(frozen=True, slots=True)
class Graph:
    """The steps as `Workflow` collected them, by position in the order they were added."""

    name: str
    steps: list[str]
    position: Mapping[str, int]  # by step name
    waits_for: Mapping[int, tuple[str, ...]]  # the names each step waits for
    policy: Mapping[int, tuple[int | None, bool]]  # (at least, always) of a step that has one
    payloads: list[str]
    jobs: list[StepJob]
    job_of: list[int]  # each step's job, as a position in `jobs`


def ordered_workflow(graph: Graph, trace_context: str | None) -> NewWorkflow:
    """The steps in an order where each comes after those it waits for: the order they were
    added when that is one (no step waits for one added after it), else a topological order.

    Raises:
        WorkflowDefinitionError: a step waiting for one not in the workflow, or a cycle (named).
    """
    names, position = graph.steps, graph.position
    upstream: dict[int, list[int]] = {}
    in_order = True
    for step, waits_for in graph.waits_for.items():
        positions = []
        for name in waits_for:
            up = position.get(name)
            if up is None:
                raise WorkflowDefinitionError(
                    f"workflow {graph.name!r}: step {names[step]!r} waits for {name!r}, "
                    "which is not a step of this workflow"
                )
            positions.append(up)
        in_order = in_order and max(positions) < step
        upstream[step] = positions
    new_position: list[int] | None = None  # the order added: each step's own position
    if not in_order:
        order = _topological_order(
            {n: graph.waits_for.get(i, ()) for n, i in position.items()}, graph.name
        )
        new_position = [0] * len(names)
        for index, name in enumerate(order):
            new_position[position[name]] = index
    allowed_failures = {}
    for step, positions in upstream.items():
        at_least, always = graph.policy.get(step, (None, False))
        waited = len(positions)
        if always:
            allowed_failures[step] = waited
        elif at_least is not None:
            allowed_failures[step] = waited - at_least
        else:
            allowed_failures[step] = 0
    if new_position is None:
        return NewWorkflow(
            name=graph.name,
            trace_context=trace_context,
            steps=names,
            payloads=graph.payloads,
            jobs=graph.jobs,
            job_of=graph.job_of,
            upstream={step: sorted(positions) for step, positions in upstream.items()},
            allowed_failures=allowed_failures,
        )
    moved = sorted(range(len(names)), key=new_position.__getitem__)
    return NewWorkflow(
        name=graph.name,
        trace_context=trace_context,
        steps=[names[i] for i in moved],
        payloads=[graph.payloads[i] for i in moved],
        jobs=graph.jobs,
        job_of=[graph.job_of[i] for i in moved],
        upstream={
            new_position[step]: sorted(new_position[up] for up in positions)
            for step, positions in upstream.items()
        },
        allowed_failures={new_position[s]: a for s, a in allowed_failures.items()},
    )


def _topological_order(waits_for: Mapping[str, Sequence[str]], workflow: str) -> list[str]:
    """The steps, each after those it waits for, in the order they were added otherwise.

    Raises:
        WorkflowDefinitionError: the steps wait for each other in a cycle (named).
    """
    order: list[str] = []
    state: dict[str, int] = {}  # 1: being visited, 2: done
    for start in waits_for:
        if state.get(start) == 2:
            continue
        # Depth first without recursion: a chain of thousands of steps would exhaust the stack.
        path: list[str] = [start]
        iterators = [iter(waits_for[start])]
        state[start] = 1
        while iterators:
            upstream = next(iterators[-1], None)
            if upstream is None:
                done = path.pop()
                iterators.pop()
                state[done] = 2
                order.append(done)
            elif state.get(upstream) == 1:
                cycle = [*path[path.index(upstream) :], upstream]
                raise WorkflowDefinitionError(
                    f"workflow {workflow!r}: its steps wait for each other in a cycle "
                    "(each waits for the next): " + " -> ".join(cycle)
                )
            elif upstream not in state:
                state[upstream] = 1
                path.append(upstream)
                iterators.append(iter(waits_for[upstream]))
    return order
