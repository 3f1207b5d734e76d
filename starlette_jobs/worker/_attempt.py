"""One attempt at one claimed job: look it up, validate its arguments, run it, judge the result."""

from __future__ import annotations

import asyncio
import logging
import os
import sysconfig
import traceback
from collections.abc import Awaitable
from typing import Any

from .._attempt_records import Claim, Outcome, outcome_of_attempt
from .._errors import JobArgumentsError, UnknownJobError, UnstorableResultError
from .._job import Job, registered_job
from .._records import JobStatus
from .._retry import delay_after_failure
from .._storable import MAX_ERROR_LENGTH, MAX_RESULT_BYTES, storable, storable_json
from .._tracing import ProcessScope, Tracing
from ._context import CURRENT_JOB, AttemptControl
from ._loop_time import timed
from ._steps import is_step

logger = logging.getLogger("starlette_jobs.worker")

# Read once: an enum member read off its class costs 60 ns in this Python, and the success is
# read per attempt.
_SUCCEEDED = JobStatus.SUCCEEDED

CANCEL_REQUESTED = "cancelled on request"
"""The error of an attempt that `jobs.cancel` stopped, and the message of its CancelledError."""


async def run_attempt(claim: Claim, tracing: Tracing, control: AttemptControl) -> Outcome:
    """Runs the job and returns how the attempt ended. Never raises, except `CancelledError`
    when the worker cancelled the attempt for itself (shutdown, or its lease was lost), as
    `control.stopped_by_worker` tells: no outcome then.

    An attempt that `jobs.cancel` asked to stop (`control.cancel_requested`) ends `cancelled`
    however it ends, never retried: with what the job returned as its result (it caught the
    cancellation, or a sync job saw the flag), else with the error that ended it.
    """
    control.started = True
    if control.stopped_by_worker:
        # Shutdown or a lost lease came before the attempt's first step: the job never ran.
        raise asyncio.CancelledError()
    if control.cancel_requested:
        # `jobs.cancel` came before the job's first step (even before its claim was known
        # here): it ends cancelled without running.
        return _cancelled(claim, None)
    try:
        job = registered_job(claim.name)
        kwargs = job._arguments.parse(claim.payload)  # Job._parse_arguments, one call less
    except (UnknownJobError, JobArgumentsError) as error:
        # Retrying cannot help: the job's code or its stored arguments are wrong.
        text = _bounded(f"{type(error).__name__}: {error}")  # a message per invalid item
        control.error_type = type(error).__qualname__
        logger.error("job %s (%s) cannot run: %s", claim.id, claim.name, text)
        return _failed(claim, JobStatus.FAILED, None, text)

    with tracing.process(
        claim.queue, claim.name, claim.id, claim.attempts, claim.trace_context
    ) as scope:
        deadline = None if job.timeout is None else asyncio.timeout(job.timeout)
        control.claim = claim  # what `current_job()` describes, made only if the job asks
        try:
            current = CURRENT_JOB.set(control)  # as `running(control)` would, for less
            try:
                if deadline is None:
                    result = await _run(job, kwargs, control)
                else:
                    async with deadline:
                        result = await _run(job, kwargs, control)
            finally:
                CURRENT_JOB.reset(current)
        except TimeoutError as error:
            if control.cancel_requested:
                return _cancelled(claim, error)
            if deadline is None or not deadline.expired():
                return _attempt_failed(control, job, error, scope)  # the job's own TimeoutError
            control.timed_out = True  # a sync job's thread runs on: it sees the flag
            timed_out = TimeoutError(f"job timed out after {job.timeout:g} s")
            return _attempt_failed(control, job, timed_out, scope)
        except asyncio.CancelledError as error:
            if control.stopped_by_worker:
                raise
            # Cancelled on request, or the job cancelled itself, or let the CancelledError of
            # an inner task through. Undo the cancel requests of this task, so the worker's code
            # that runs next in it is not cancelled too.
            _uncancel()
            if control.cancel_requested:
                return _cancelled(claim, None if _is_request(error) else error)
            return _attempt_failed(control, job, asyncio.CancelledError("job cancelled"), scope)
        except BaseException as error:  # a job must never take the worker down
            if control.cancel_requested and not control.stopped_by_worker:
                _uncancel()
                return _cancelled(claim, error)
            return _attempt_failed(control, job, error, scope)
        if result is not None and not control.cancel_requested:
            try:
                text = storable_json(result, MAX_RESULT_BYTES).decode()
            except ValueError as error:
                return await _unstorable(claim, job, control, error, scope)
            return _outcome(claim, _SUCCEEDED, None, text)
    if control.cancel_requested and not control.stopped_by_worker:
        # It caught the cancellation and returned (partial results), or ignored it, or a sync
        # job saw the flag: the job was asked to stop, and it is not run again.
        _uncancel()
        logger.info("job %s (%s) cancelled on request", claim.id, claim.name)
        return _outcome(claim, JobStatus.CANCELLED, None, _result_json(claim, result))
    stored = None if result is None else _result_json(claim, result)  # no call for the Nones
    return _outcome(claim, _SUCCEEDED, None, stored)


def _run(job: Job[..., Any], kwargs: dict[str, Any], control: AttemptControl) -> Awaitable[Any]:
    """The job's run, timed if the worker counts how long its jobs hold the loop."""
    if not job.is_async:
        # Its thread marked on the control: shutdown waits a little for it (`_shutdown.py`).
        return job._run(kwargs, control.in_thread)
    if control.loop_time is None:
        # An async job's own coroutine, not `Job._run`'s around it: one coroutine less per
        # attempt. Called here, inside the attempt's `try`, as it would be inside `Job._run`.
        run: Awaitable[Any] = job.func(**kwargs)
        return run
    return timed(job._run(kwargs), control.loop_time)


def _is_request(error: asyncio.CancelledError) -> bool:
    return error.args == (CANCEL_REQUESTED,)


def _uncancel() -> None:
    current = asyncio.current_task()
    while current is not None and current.cancelling():
        current.uncancel()


def _cancelled(claim: Claim, error: BaseException | None) -> Outcome:
    logger.info("job %s (%s) cancelled on request", claim.id, claim.name)
    text = CANCEL_REQUESTED if error is None else f"{CANCEL_REQUESTED}: {_error_text(error)}"
    return _outcome(claim, JobStatus.CANCELLED, text, None)


def _attempt_failed(
    control: AttemptControl, job: Job[..., object], error: BaseException, scope: ProcessScope
) -> Outcome:
    scope.failed(error)
    control.error_type = type(error).__qualname__
    claim = control.claim
    assert claim is not None  # set before the job runs
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
    return _outcome(claim, status, error, None, retry_delay=delay)


def _outcome(
    claim: Claim,
    status: JobStatus,
    error: str | None,
    result: str | None,
    *,
    retry_delay: float | None = None,
) -> Outcome:
    return outcome_of_attempt(
        claim.id, claim.lease_token, status, retry_delay, error, result,
        claim.workflow_id is not None,
    )  # fmt: skip


def _error_text(error: BaseException) -> str:
    described = traceback.TracebackException.from_exception(error)
    _drop_the_way_in(described)
    # PostgreSQL text cannot hold NUL characters or lone surrogates: they are kept as escapes.
    return _bounded(storable("".join(described.format()).strip()))


def _bounded(text: str) -> str:
    if len(text) > MAX_ERROR_LENGTH:
        # Keep the end: the exception line and the innermost frames say the most.
        text = "...\n" + text[-MAX_ERROR_LENGTH:]
    return text


# Frames of this package and of Python's own library: the way from the worker into the job.
_NOT_THE_JOBS = (
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,  # the package
    os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep,
)


def _drop_the_way_in(described: traceback.TracebackException) -> None:
    """Drops, from a traceback and those chained to it, the frames that lead from the worker
    (this package, asyncio, a thread pool) to the job's own code: the error a user reads
    starts at their job. Frames of ours that the job called into (a library call that raised)
    are kept, and so is a traceback that has no frame of the job's at all."""
    seen: set[int] = set()
    pending = [described]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        frames = list(current.stack)
        first_of_the_job = next(
            (at for at, frame in enumerate(frames) if not frame.filename.startswith(_NOT_THE_JOBS)),
            None,
        )
        if first_of_the_job:
            current.stack = traceback.StackSummary.from_list(frames[first_of_the_job:])
        pending.extend(
            chained
            for chained in (current.__cause__, current.__context__, *(current.exceptions or ()))
            if chained is not None
        )


async def _unstorable(
    claim: Claim,
    job: Job[..., object],
    control: AttemptControl,
    error: ValueError,
    scope: ProcessScope,
) -> Outcome:
    """The outcome of an attempt whose result cannot be stored: a workflow's step fails (the
    steps waiting for it need that result), any other job succeeds without it."""
    try:
        step = await is_step(control.steps, claim.id)
    except asyncio.CancelledError:
        if control.stopped_by_worker:
            raise
        _uncancel()  # `jobs.cancel` came while the store was asked: the job is cancelled
        return _cancelled(claim, None)
    if step:
        failure = UnstorableResultError(f"the step's result cannot be stored: {error}")
        return _attempt_failed(control, job, failure, scope)
    logger.warning("job %s (%s): result not stored: %s", claim.id, claim.name, error)
    return _outcome(claim, JobStatus.SUCCEEDED, None, None)


def _result_json(claim: Claim, result: object) -> str | None:
    if result is None:
        return None
    # What enqueue refuses in arguments (NUL, lone surrogates, deep nesting, huge integers)
    # would make the outcome fail to be written, or the row fail to be read; a huge value would
    # hold up the outcomes written with it. Dropped, not failed: the job did its work, and
    # running it again would do it again, to return the same value.
    try:
        return storable_json(result, MAX_RESULT_BYTES).decode()
    except ValueError as error:
        logger.warning("job %s (%s): result not stored: %s", claim.id, claim.name, error)
        return None
