"""What a workflow's step reads of the steps it waited for (docs/workflows.md): their results,
validated into the types the step names, as `current_job().upstream_result` returns them."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pydantic

from .._errors import UpstreamStepError
from .._records import JobStatus
from .._workflow_records import UpstreamStep

T = TypeVar("T")

UpstreamReader = Callable[[int], Awaitable[list[UpstreamStep]]]
"""`Store.upstream_results`, as the worker hands it to each attempt."""


@functools.lru_cache(maxsize=256)
def _cached_adapter(result_type: Any) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(result_type)


def _adapter(result_type: Any) -> pydantic.TypeAdapter[Any]:
    """A type's adapter, built once (building one takes a millisecond or so)."""
    try:
        return _cached_adapter(result_type)
    except TypeError:  # not hashable
        return pydantic.TypeAdapter(result_type)


def _parsed(job_id: int, found: UpstreamStep, result_type: type[T]) -> T:
    text = "null" if found.result is None else found.result
    try:
        value: T = _adapter(result_type).validate_json(text)
    except pydantic.ValidationError as error:
        raise UpstreamStepError(
            f"job {job_id}: the result of step {found.step!r} does not fit "
            f"{getattr(result_type, '__name__', result_type)!s}: {error}"
        ) from None
    return value


async def upstream_result(
    reader: UpstreamReader | None, job_id: int, step: str, result_type: type[T]
) -> T:
    """The result of `step`, one of those the job `job_id` waits for, as `result_type`.

    Raises:
        UpstreamStepError: `step` is not one it waits for, did not succeed, or its result does
            not fit `result_type`.
    """
    steps = await _read(reader, job_id)
    found = next((s for s in steps if s.step == step), None)
    if found is None:
        raise UpstreamStepError(
            f"job {job_id}: {step!r} is not a step it waits for "
            f"(it waits for {[s.step for s in steps]})"
        )
    if found.status is not JobStatus.SUCCEEDED:
        raise UpstreamStepError(
            f"job {job_id}: step {step!r} ended {found.status.value}: it has no result "
            "(a step with after(always=True) or at_least= may run after such a step)"
        )
    return _parsed(job_id, found, result_type)


async def upstream_results(
    reader: UpstreamReader | None, job_id: int, result_type: type[T]
) -> dict[str, T]:
    """The results of the steps the job waits for that succeeded, by step name, each as
    `result_type`."""
    steps = await _read(reader, job_id)
    return {
        s.step: _parsed(job_id, s, result_type) for s in steps if s.status is JobStatus.SUCCEEDED
    }


async def upstream_statuses(reader: UpstreamReader | None, job_id: int) -> dict[str, JobStatus]:
    """The status of each step the job waits for, by step name."""
    return {s.step: s.status for s in await _read(reader, job_id)}


async def _read(reader: UpstreamReader | None, job_id: int) -> list[UpstreamStep]:
    if reader is None:
        raise UpstreamStepError(
            f"job {job_id} runs outside a worker: it has no steps to read the results of"
        )
    return await reader(job_id)
