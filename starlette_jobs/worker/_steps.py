"""What an attempt of a workflow's step asks of the store beyond its outcome (docs/workflows.md):
to add steps to its workflow (`current_job().extend_workflow()`), and whether the job is a step
at all (asked only when its result cannot be stored: a step then fails, since the steps waiting
for it need that result)."""

from __future__ import annotations

import asyncio
import functools
from typing import Protocol
from uuid import UUID

from .._added_steps import AddedSteps
from .._attempt_records import Claim
from .._enqueue import check_step_payload_sizes
from .._workflow_records import EnqueuedWorkflow, NewWorkflow


class StepStore(Protocol):
    """The part of `Store` an attempt uses for its workflow, as the worker hands it over."""

    async def workflow_of(self, job_id: int) -> int | None: ...

    async def add_steps(
        self, job_id: int, lease_token: UUID, new: NewWorkflow
    ) -> EnqueuedWorkflow: ...


class SizedSteps:
    """The store as an attempt sees it for its workflow, with `enqueue`'s limit on the size of
    arguments applied to the steps it adds (`max_payload_bytes`)."""

    def __init__(self, store: StepStore, max_payload_bytes: int) -> None:
        self._store = store
        self._limit = max_payload_bytes
        self.workflow_of = store.workflow_of

    async def add_steps(self, job_id: int, lease_token: UUID, new: NewWorkflow) -> EnqueuedWorkflow:
        check_step_payload_sizes(new, self._limit)
        return await self._store.add_steps(job_id, lease_token, new)


def added_steps(store: StepStore | None, job_id: int, claim: Claim | None) -> AddedSteps:
    """What `current_job().extend_workflow()` returns: a builder whose `enqueue` adds through
    `store`, under the attempt's lease token (none outside a worker: `enqueue` says so)."""
    if store is None or claim is None:
        return AddedSteps(job_id, None)
    return AddedSteps(job_id, functools.partial(store.add_steps, claim.id, claim.lease_token))


async def is_step(store: StepStore | None, job_id: int) -> bool:
    """Whether the job is a workflow's step. A store that cannot answer counts as yes: failing
    the attempt (retried by its policy) is safe, while a step that succeeded without its result
    would hand its dependents nothing."""
    if store is None:
        return False  # run outside a worker (tests calling `run_attempt`): no workflow
    try:
        return await store.workflow_of(job_id) is not None
    except asyncio.CancelledError:
        raise
    except Exception:
        return True
