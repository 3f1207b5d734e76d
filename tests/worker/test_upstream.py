"""What a workflow's step reads of the steps it waited for, validated into the types it names
(`worker/_upstream.py`); through a worker and both stores: contract/test_workflows_contract.py."""

from __future__ import annotations

from datetime import date

import pytest

from starlette_jobs import JobStatus, UpstreamStepError
from starlette_jobs._workflow_records import UpstreamStep
from starlette_jobs.worker._upstream import upstream_result, upstream_results, upstream_statuses

STEPS = [
    UpstreamStep("day", JobStatus.SUCCEEDED, '"2026-03-01"'),
    UpstreamStep("nothing", JobStatus.SUCCEEDED, None),
    UpstreamStep("broke", JobStatus.FAILED, None),
]


async def reader(job_id: int) -> list[UpstreamStep]:
    assert job_id == 5
    return STEPS


async def test_a_result_comes_back_as_the_type_asked_for() -> None:
    assert await upstream_result(reader, 5, "day", date) == date(2026, 3, 1)
    assert await upstream_result(reader, 5, "day", str) == "2026-03-01"


async def test_the_results_of_those_that_succeeded_and_every_status() -> None:
    assert await upstream_results(reader, 5, str | None) == {  # type: ignore[arg-type]
        "day": "2026-03-01",
        "nothing": None,
    }
    assert await upstream_statuses(reader, 5) == {
        "day": JobStatus.SUCCEEDED,
        "nothing": JobStatus.SUCCEEDED,
        "broke": JobStatus.FAILED,
    }


@pytest.mark.parametrize(
    ("step", "result_type", "message"),
    [
        ("other", int, r"'other' is not a step it waits for \(it waits for \['day'"),
        ("broke", int, "step 'broke' ended failed: it has no result"),
        ("day", int, "the result of step 'day' does not fit int"),
    ],
)
async def test_what_cannot_be_read_says_why(step: str, result_type: type, message: str) -> None:
    with pytest.raises(UpstreamStepError, match=message):
        await upstream_result(reader, 5, step, result_type)


async def test_outside_a_worker_there_is_nothing_to_read() -> None:
    with pytest.raises(UpstreamStepError, match="runs outside a worker"):
        await upstream_statuses(None, 5)
