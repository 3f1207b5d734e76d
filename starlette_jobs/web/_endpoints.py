"""The two endpoints of the status routes: a job's public fields (`GET /{job_id}`) and its
server-sent events (`GET /{job_id}/events`); who may see a job; what their OpenAPI entries say."""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .._errors import DatabaseUnavailableError
from .._jobs import Jobs
from .._records import JobRecord, JobStatus
from ._accepted import check_retry_after
from ._handlers import get_jobs, json_body
from ._status_tokens import JobStatusTokens
from ._types import Authorize, Endpoint, PublicFields

logger = logging.getLogger("starlette_jobs")


class EventStreamInSchema(Response):
    """What FastAPI's OpenAPI schema shows as the events route's 200 (`text/event-stream`).
    FastAPI never builds one: the endpoint answers with a response of its own every time."""

    media_type = "text/event-stream"


_DETAIL_JSON = {
    "application/json": {
        "schema": {
            "type": "object",
            "properties": {"detail": {"type": "string"}},
            "required": ["detail"],
        }
    }
}


RETRY_AFTER_HEADER = {
    "description": "Seconds to wait before looking again.",
    "schema": {"type": "integer"},
}


def documented_responses(
    success: str, headers: Mapping[str, Any] | None = None
) -> dict[int | str, dict[str, Any]]:
    return {
        200: {"description": success, **({"headers": dict(headers)} if headers else {})},
        404: {"description": "No job has this id.", "content": _DETAIL_JSON},
        503: {
            "description": "The job store cannot be reached; try again later.",
            "content": _DETAIL_JSON,
            "headers": {"Retry-After": RETRY_AFTER_HEADER},
        },
    }


class JobFinder:
    """The job a request to the status routes names, if that request may see it."""

    def __init__(self, authorize: Authorize | None, tokens: JobStatusTokens | None) -> None:
        if authorize is not None and not callable(authorize):
            raise TypeError(f"authorize must be a function of (request, record), got {authorize!r}")
        if tokens is not None and not isinstance(tokens, JobStatusTokens):
            raise TypeError(f"tokens must be a JobStatusTokens, got {tokens!r}")
        self._authorize = authorize
        self._tokens = tokens
        self.parameter = "{job_id}" if tokens is None else "{job_token}"

    async def __call__(self, request: Request) -> tuple[Jobs, JobRecord | None]:
        jobs = get_jobs(request)
        if self._tokens is None:
            # `get` takes the digits of an id as they came, and finds no job for what is no id.
            record = await jobs.get(request.path_params["job_id"])
        else:
            job_id = self._tokens.job_id(request.path_params["job_token"])
            record = None if job_id is None else await jobs.get(job_id)
        if record is None or self._authorize is None:
            return jobs, record
        allowed = self._authorize(request, record)
        if inspect.isawaitable(allowed):
            allowed = await allowed
        # Refused as if missing: a 403 would tell a caller walking the ids which ones exist.
        return jobs, record if allowed is True else None


def status_endpoint(find: JobFinder, public: PublicFields, retry_after: int) -> Endpoint:
    async def show(request: Request) -> Response:
        try:
            _, record = await find(request)
        except DatabaseUnavailableError as error:
            return _unavailable(error, retry_after)
        if record is None:
            return _not_found(request)
        headers = {"Cache-Control": "no-store"}
        if not record.finished:
            headers["Retry-After"] = str(_look_again_in(record, retry_after))
        return Response(json_body(public(record)), media_type="application/json", headers=headers)

    return show


def events_endpoint(
    find: JobFinder, public: PublicFields, retry_after: int, progress_interval: float
) -> Endpoint:
    from ._sse import events_response  # the one import of sse-starlette

    async def stream(request: Request) -> Response:
        try:
            jobs, record = await find(request)
        except DatabaseUnavailableError as error:
            return _unavailable(error, retry_after)
        if record is None:
            return _not_found(request)
        return events_response(jobs, record, public, progress_interval, json_body)

    return stream


def check_settings(retry_after: int, progress_interval: float) -> None:
    check_retry_after(retry_after)
    # A comparison that NaN fails, so that it is refused too.
    if not (isinstance(progress_interval, int | float) and progress_interval > 0):
        raise ValueError(f"progress_interval must be > 0 seconds, got {progress_interval!r}")


def _look_again_in(record: JobRecord, retry_after: int) -> int:
    """`retry_after`, or the seconds until a pending job is due if later (a delayed job, a
    retry's back-off): no client need look before then."""
    if record.status is not JobStatus.PENDING:
        return retry_after
    due_in = (record.run_at - datetime.now(UTC)).total_seconds()
    return max(retry_after, math.ceil(due_in))


def _unavailable(error: DatabaseUnavailableError, retry_after: int) -> Response:
    """503: the client may well try again soon, and should be told so rather than get a 500."""
    logger.warning("job status route: %s", error)
    return JSONResponse(
        {"detail": "the job store is unavailable, try again later"},
        status_code=503,
        headers={"Retry-After": str(max(retry_after, 1))},
    )


def _not_found(request: Request) -> Response:
    if "job_token" in request.path_params:
        return JSONResponse({"detail": "no job at this URL"}, status_code=404)
    job_id = request.path_params["job_id"]
    return JSONResponse({"detail": f"no job with id {job_id!r}"}, status_code=404)
