"""One attempt at one claimed job: look it up, validate its arguments, run it, judge the result."""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Callable

import pydantic_core

from ._context import RunningJob, running
from ._errors import JobArgumentsError, UnknownJobError
from ._job import Job, registered_job
from ._records import Claim, JobStatus, Outcome
from ._retry import delay_after_failure
from ._storable import (
    REPLACEMENT_CHARACTER,
    json_problems,
    may_be_unstorable,
    python_text_problems,
    storable,
)
from ._tracing import ProcessScope, Tracing

logger = logging.getLogger("starlette_jobs.worker")

_MAX_ERROR_LENGTH = 8000


async def run_attempt(
    claim: Claim, tracing: Tracing, cancelled_by_worker: Callable[[], bool]
) -> Outcome:
    """Runs the job and returns how the attempt ended. Never raises, except `CancelledError`
    when the worker cancelled the attempt (shutdown, or its lease was lost), as
    `cancelled_by_worker()` tells: no outcome then."""
    try:
        job = registered_job(claim.name)
        kwargs = job._parse_arguments(claim.payload)
    except (UnknownJobError, JobArgumentsError) as error:
        # Retrying cannot help: the job's code or its stored arguments are wrong.
        logger.error("job %s (%s) cannot run: %s", claim.id, claim.name, error)
        return _failed(claim, JobStatus.FAILED, None, f"{type(error).__name__}: {error}")

    with tracing.process(
        claim.queue, claim.name, claim.id, claim.attempts, claim.trace_context
    ) as scope:
        deadline = None if job.timeout is None else asyncio.timeout(job.timeout)
        me = RunningJob(claim.id, claim.name, claim.queue, claim.attempts, claim.max_attempts)
        try:
            with running(me):
                if deadline is None:
                    result = await job._run(kwargs)
                else:
                    async with deadline:
                        result = await job._run(kwargs)
        except TimeoutError as error:
            if deadline is None or not deadline.expired():
                return _attempt_failed(claim, job, error, scope)  # the job's own TimeoutError
            timed_out = TimeoutError(f"job timed out after {job.timeout:g} s")
            return _attempt_failed(claim, job, timed_out, scope)
        except asyncio.CancelledError:
            if cancelled_by_worker():
                raise
            # The job cancelled itself, or let the CancelledError of an inner task through:
            # an ordinary failed attempt. Undo its own cancel requests, so the worker's code
            # that runs next in this task is not cancelled too.
            current = asyncio.current_task()
            while current is not None and current.cancelling():
                current.uncancel()
            return _attempt_failed(claim, job, asyncio.CancelledError("job cancelled"), scope)
        except BaseException as error:  # a job must never take the worker down
            return _attempt_failed(claim, job, error, scope)
    return Outcome(
        id=claim.id,
        lease_token=claim.lease_token,
        status=JobStatus.SUCCEEDED,
        retry_delay=None,
        error=None,
        result=_result_json(claim, result),
    )


def _attempt_failed(
    claim: Claim, job: Job[..., object], error: BaseException, scope: ProcessScope
) -> Outcome:
    scope.failed(error)
    text = _error_text(error)
    delay = delay_after_failure(
        job.retry, claim.attempts, claim.max_attempts, error, job.non_retryable
    )
    if delay is None:
        logger.error(
            "job %s (%s) failed on attempt %d/%d, giving up: %s",
            claim.id, claim.name, claim.attempts, claim.max_attempts, text.splitlines()[-1],
        )  # fmt: skip
        return _failed(claim, JobStatus.FAILED, None, text)
    logger.warning(
        "job %s (%s) failed on attempt %d/%d, retrying in %.3g s: %s",
        claim.id, claim.name, claim.attempts, claim.max_attempts, delay, text.splitlines()[-1],
    )  # fmt: skip
    return _failed(claim, JobStatus.PENDING, delay, text)


def _failed(claim: Claim, status: JobStatus, delay: float | None, error: str) -> Outcome:
    return Outcome(
        id=claim.id,
        lease_token=claim.lease_token,
        status=status,
        retry_delay=delay,
        error=error,
        result=None,
    )


def _error_text(error: BaseException) -> str:
    # PostgreSQL text cannot hold NUL characters or lone surrogates: they are kept as escapes.
    text = storable("".join(traceback.format_exception(error)).strip())
    if len(text) > _MAX_ERROR_LENGTH:
        # Keep the end: the exception line and the innermost frames say the most.
        text = "...\n" + text[-_MAX_ERROR_LENGTH:]
    return text


def _result_json(claim: Claim, result: object) -> str | None:
    if result is None:
        return None
    try:
        text = pydantic_core.to_json(result)
    except (pydantic_core.PydanticSerializationError, ValueError) as error:
        logger.warning("job %s (%s): result not stored, not JSON: %s", claim.id, claim.name, error)
        return None
    # What enqueue refuses in arguments (NUL, lone surrogates, deep nesting, huge integers)
    # would make the outcome fail to be written, or the row fail to be read.
    if may_be_unstorable(text):
        problems = json_problems(text, top_level_keys=False)
        if REPLACEMENT_CHARACTER in text:
            # A lone surrogate in a dict key is written as replacement characters.
            problems += python_text_problems(result)
        if problems:
            loc, reason = problems[0]
            where = ".".join(str(part) for part in loc) or "(result)"
            logger.warning(
                "job %s (%s): result not stored: %s: %s", claim.id, claim.name, where, reason
            )
            return None
    return text.decode()
