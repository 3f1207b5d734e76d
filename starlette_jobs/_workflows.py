"""`Workflow`: several jobs enqueued at once, some waiting for others (docs/workflows.md).

A workflow is a graph of named steps, each an ordinary `@job` call with its arguments, each
naming the steps it waits for. It is checked whole before anything is written (arguments as
each step is added; names, unknown steps and cycles at enqueue), then written in one statement,
in the caller's transaction if one is given, as a single enqueue is. What waits is released by
the store, in the statement that writes the outcome of the last step it waited for.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, overload

from ._errors import JobArgumentsError, WorkflowDefinitionError
from ._job import ConfiguredJob, HasEnqueuer, Job, started_enqueuer
from ._storable import unstorable
from ._workflow_graph import Graph, ordered_workflow
from ._workflow_records import EnqueuedWorkflow, NewWorkflow, StepJob

if TYPE_CHECKING:
    from .postgres._transactions import CallerTransaction

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

_STEP_NAME = re.compile(r"[A-Za-z0-9_.:<>\[\]-]{1,200}")


@dataclass(frozen=True, slots=True)
class Step(Generic[R]):
    """A step added to a `Workflow`: what later steps name to wait for it. `R` is what its job
    returns (awaited), which a step waiting for it reads with `current_job().upstream_result`."""

    name: str
    job: Job[..., Any]


class Workflow:
    """A graph of steps to enqueue at once; see the module's docstring.

    Example:
        >>> flow = Workflow("invoice")
        >>> pdf = flow.add("render", render_pdf, order_id=7)
        >>> paid = flow.add("capture", capture_payment, order_id=7)
        >>> flow.after(pdf, paid).add("send", send_invoice, order_id=7)
        >>> enqueued = await flow.enqueue()
    """

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not 1 <= len(name) <= 200:
            raise WorkflowDefinitionError(f"a workflow's name is 1 to 200 characters: {name!r}")
        if (why := unstorable(name)) is not None:
            raise WorkflowDefinitionError(f"a workflow's name {why}: {name!r}")
        self.name = name
        # A column per field, a step being a position in them (in the order added): a fan-out
        # of 10,000 steps costs lists extended, not 10,000 objects (docs/performance.md).
        self._position: dict[str, int] = {}  # by step name
        self._names: list[str] = []
        self._payloads: list[str] = []
        self._job_of: list[int] = []  # each step's job, as a position in _jobs
        self._jobs: list[Job[..., Any]] = []
        self._job_position: dict[int, int] = {}  # by id() of the job
        # Only for the steps that wait: the names they wait for, and their policy
        # (at_least, always; at_least None: every step it waits for must succeed).
        self._waits_for: dict[int, tuple[str, ...]] = {}
        self._policy: dict[int, tuple[int | None, bool]] = {}

    def __repr__(self) -> str:
        return f"<Workflow {self.name} steps={self._names}>"

    @overload
    def add(
        self,
        step: str,
        job: Job[P, Coroutine[Any, Any, T]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> Step[T]: ...

    @overload
    def add(self, step: str, job: Job[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Step[T]: ...

    def add(self, step: str, job: Job[P, Any], /, *args: P.args, **kwargs: P.kwargs) -> Step[Any]:
        """Adds a step that runs `job` with these arguments and waits for nothing.

        Raises:
            JobArgumentsError: the arguments do not fit the job's signature (the error's
                locations start with the step's name).
            WorkflowDefinitionError: a step of this name is already in the workflow.
        """
        return self._add(step, job, args, kwargs, (), None, always=False)

    def after(
        self, *steps: Step[Any] | str, at_least: int | None = None, always: bool = False
    ) -> After:
        """The steps added through what this returns wait for `steps` (named, or as `add`
        returned them; one not added yet may be named, and must be by `enqueue`).

        Args:
            at_least: run once all of `steps` have finished, if at least this many of them
                succeeded (else it is cancelled); default: run only if every one succeeded,
                and be cancelled as soon as one fails or is cancelled.
            always: run once all of `steps` have finished, whatever their outcome (a clean-up
                step).

        Example:
            >>> flow.after("render", "capture").add("send", send_invoice, order_id=7)
        """
        if not steps:
            raise WorkflowDefinitionError("after() needs at least one step to wait for")
        names = tuple(step if isinstance(step, str) else step.name for step in steps)
        if len(set(names)) < len(names):
            raise WorkflowDefinitionError(f"after() names a step twice: {list(names)}")
        if always and at_least is not None:
            raise WorkflowDefinitionError("after(): give always=True or at_least=, not both")
        if at_least is not None and (
            isinstance(at_least, bool) or not isinstance(at_least, int) or at_least < 0
        ):
            raise WorkflowDefinitionError(f"after(): at_least must be an int >= 0: {at_least!r}")
        if at_least is not None and at_least > len(names):
            raise WorkflowDefinitionError(
                f"after(): at_least={at_least} of {len(names)} steps can never be met"
            )
        return After(self, names, at_least, always)

    @overload
    def add_many(
        self,
        prefix: str,
        job: Job[..., Coroutine[Any, Any, T]],
        items: Iterable[Mapping[str, Any]],
    ) -> list[Step[T]]: ...

    @overload
    def add_many(
        self, prefix: str, job: Job[..., T], items: Iterable[Mapping[str, Any]]
    ) -> list[Step[T]]: ...

    def add_many(
        self, prefix: str, job: Job[..., Any], items: Iterable[Mapping[str, Any]]
    ) -> list[Step[Any]]:
        """Adds one step per mapping of keyword arguments (a fan-out), named `prefix[0]`,
        `prefix[1]`, ...; none waits for anything."""
        items = list(items)
        if not isinstance(job, Job):
            raise _not_a_job(prefix, job)
        # One pydantic call for all of them when they are valid; else each says what is wrong.
        payloads = job._arguments.serialize_batch(items)
        if payloads is None:
            return [
                self._add(f"{prefix}[{index}]", job, (), item, (), None, always=False)
                for index, item in enumerate(items)
            ]
        # Every name is the prefix and a number: checking the longest checks them all.
        _check_step_name(f"{prefix}[{max(len(items) - 1, 0)}]")
        start = len(self._names)
        names = [f"{prefix}[{index}]" for index in range(len(items))]
        taken = self._position.keys() & names if self._position else ()  # distinct among them
        if taken:
            raise WorkflowDefinitionError(f"workflow {self.name!r}: two steps named {min(taken)!r}")
        self._position.update(zip(names, range(start, start + len(names)), strict=True))
        self._names += names
        self._payloads += payloads
        self._job_of += [self._job_index(job)] * len(names)
        return _steps(names, job)

    def chain(self, *steps: Step[Any] | str) -> None:
        """Makes each of `steps` wait for the one before it (as well as for what it already
        waits for). A clean-up step (`always=True`) waits for it whatever its outcome too.

        Raises:
            WorkflowDefinitionError: a step is not in the workflow, or waits for at least N of
                its steps (`at_least=`): the step before it would be counted among them, its
                failure allowed; list it in that `after()`, or chain a step in between.
        """
        names = [step if isinstance(step, str) else step.name for step in steps]
        for before, name in itertools.pairwise(names):
            position = self._position.get(name)
            if position is None:
                raise WorkflowDefinitionError(f"chain(): no step named {name!r} was added")
            waits_for = self._waits_for.get(position, ())
            at_least, _ = self._policy.get(position, (None, False))
            # at_least=0 lets every one fail, as always=True does: one more changes nothing.
            if at_least and before not in waits_for:
                raise WorkflowDefinitionError(
                    f"chain(): step {name!r} waits for at least {at_least} of "
                    f"{len(waits_for)} steps; chaining {before!r} to it would count it among "
                    "them, its failure allowed: name it in that after(), or chain a step "
                    "in between"
                )
            if before not in waits_for:
                self._waits_for[position] = (*waits_for, before)

    def _add(
        self,
        step: str,
        job: Job[..., Any],
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        waits_for: tuple[str, ...],
        at_least: int | None,
        *,
        always: bool,
        payload: str | None = None,
    ) -> Step[Any]:
        """Adds the step; `payload`: its arguments, already validated into JSON text."""
        _check_step_name(step)
        if step in self._position:
            raise WorkflowDefinitionError(f"workflow {self.name!r}: two steps named {step!r}")
        if not isinstance(job, Job):
            raise _not_a_job(step, job)
        try:
            if payload is None:
                payload = job._serialize_arguments(tuple(args), kwargs)
        except JobArgumentsError as error:
            located = [{**e, "loc": (step, *e.get("loc", ()))} for e in error.errors]
            raise JobArgumentsError(job.name, located) from None
        position = self._position[step] = len(self._names)
        self._names.append(step)
        self._payloads.append(payload)
        self._job_of.append(self._job_index(job))
        if waits_for:
            self._waits_for[position] = waits_for
        if at_least is not None or always:
            self._policy[position] = (at_least, always)
        return Step(step, job)

    def _job_index(self, job: Job[..., Any]) -> int:
        """`job`'s position in `_jobs`, added there if new."""
        index = self._job_position.get(id(job))
        if index is None:
            index = self._job_position[id(job)] = len(self._jobs)
            self._jobs.append(job)
        return index

    def _new_workflow(self, trace_context: str | None) -> NewWorkflow:
        """What `enqueue` writes: see `_workflow_graph.ordered_workflow`."""
        if not self._names:
            raise WorkflowDefinitionError(f"workflow {self.name!r} has no step")
        return ordered_workflow(
            Graph(
                name=self.name,
                steps=self._names,
                position=self._position,
                waits_for=self._waits_for,
                policy=self._policy,
                payloads=self._payloads,
                jobs=[
                    StepJob(j.name, j.queue, j.priority, j.retry.max_attempts) for j in self._jobs
                ],
                job_of=self._job_of,
            ),
            trace_context,
        )

    async def enqueue(
        self, *, connection: CallerTransaction | None = None, jobs: HasEnqueuer | None = None
    ) -> EnqueuedWorkflow:
        """Checks the graph and writes every step in one statement; returns the workflow's id
        and each step's job id.

        Args:
            connection: an asyncpg connection, or a SQLAlchemy `AsyncSession` or
                `AsyncConnection` on asyncpg, whose transaction the insert joins, so that the
                workflow exists only if that transaction commits.
            jobs: the `Jobs` instance to write through (default: the one started last).

        Raises:
            WorkflowDefinitionError: a step waits for one not in the workflow, or the steps
                wait for each other in a cycle; nothing is written.
        """
        new = self._new_workflow(None)  # checked before anything else, even the database
        enqueuer = started_enqueuer() if jobs is None else jobs._ready_enqueuer
        return await enqueuer.insert_workflow(new, connection)


class After:
    """What `Workflow.after` returns: `add` a step that waits for the steps it named."""

    def __init__(
        self, workflow: Workflow, waits_for: tuple[str, ...], at_least: int | None, always: bool
    ) -> None:
        self._workflow, self._waits_for = workflow, waits_for
        self._at_least, self._always = at_least, always

    @overload
    def add(
        self,
        step: str,
        job: Job[P, Coroutine[Any, Any, T]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> Step[T]: ...

    @overload
    def add(self, step: str, job: Job[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Step[T]: ...

    def add(self, step: str, job: Job[P, Any], /, *args: P.args, **kwargs: P.kwargs) -> Step[Any]:
        """`Workflow.add`, for a step that waits (see `Workflow.after`)."""
        return self._workflow._add(
            step, job, args, kwargs, self._waits_for, self._at_least, always=self._always
        )


_new_step = object.__new__
# The slots' own setters, which a frozen dataclass's __init__ reaches the slow way round.
_set_name = Step.__dict__["name"].__set__
_set_job = Step.__dict__["job"].__set__


def _steps(names: list[str], job: Job[..., Any]) -> list[Step[Any]]:
    """`[Step(name, job) for name in names]` in half the time (a fan-out of thousands)."""
    steps = []
    for name in names:
        step = _new_step(Step)
        _set_name(step, name)
        _set_job(step, job)
        steps.append(step)
    return steps


def _check_step_name(name: str) -> str:
    if not isinstance(name, str) or not _STEP_NAME.fullmatch(name):
        raise WorkflowDefinitionError(
            f"invalid step name {name!r}: use 1 to 200 letters, digits or any of _ . : < > [ ] -"
        )
    return name


def _not_a_job(step: str, job: object) -> WorkflowDefinitionError:
    """The error for a step given something else than a `@job` function."""
    if isinstance(job, ConfiguredJob):
        return WorkflowDefinitionError(
            f"step {step!r}: a job.configure(...) cannot be a step: each step runs as its @job "
            "declares it (queue, retries, priority); pass the @job function itself"
        )
    return WorkflowDefinitionError(
        f"step {step!r}: {job!r} is not a @job function; declare it with @job"
    )
