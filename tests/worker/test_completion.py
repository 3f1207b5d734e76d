"""`current_job().complete_in` before the store is reached (`worker/_completion.py`): the job
named must be the one running, the result must be storable, and a job that no worker runs
holds no lease to complete under."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

import pytest

from starlette_jobs import JobDefinitionError, LeaseLostError, RunningJob, job
from starlette_jobs._attempt_records import Claim
from starlette_jobs.worker._completion import complete
from starlette_jobs.worker._context import AttemptControl, running


@job(name="owntx.unit.first")
async def first() -> int:
    return 1


@job(name="owntx.unit.second")
async def second() -> str | None:
    return "2"


def claim_of(name: str) -> Claim:
    return Claim(
        id=7, name=name, queue="default", payload="{}", attempts=1, max_attempts=3,
        lease_token=uuid4(), trace_context=None,
    )  # fmt: skip


async def test_a_job_run_by_hand_holds_no_lease_to_complete_under() -> None:
    me = RunningJob(id=1, name=first.name, queue="default", attempt=1, max_attempts=1)
    with running(me), pytest.raises(LeaseLostError, match="runs outside a worker"):
        await me.complete_in(None, first, 1)


async def test_the_job_named_must_be_the_one_running() -> None:
    written: list[tuple[int, UUID, str | None, Any]] = []

    async def completer(job_id: int, token: UUID, result: str | None, connection: Any) -> None:
        written.append((job_id, token, result, connection))

    claim = claim_of(first.name)
    with pytest.raises(JobDefinitionError, match=r"the job running is 'owntx\.unit\.first'"):
        await complete(completer, claim, first.name, None, second, "2")
    assert written == []
    await complete(completer, claim, first.name, "the connection", first, 1)
    assert written == [(7, claim.lease_token, "1", "the connection")]


async def test_a_result_that_cannot_be_stored_is_refused_before_anything_is_written() -> None:
    calls: list[str | None] = []

    async def completer(job_id: int, token: UUID, result: str | None, connection: Any) -> None:
        calls.append(result)

    control = AttemptControl(claim=claim_of(second.name), complete=completer)
    me = control.running_job()
    assert me is not None
    with pytest.raises(ValueError, match="job 7: result not storable"):
        await me.complete_in(None, second, "\x00")
    assert (calls, control.completed) == ([], False)
    await me.complete_in(None, second, None)
    assert (calls, control.completed) == ([None], True)
