"""Starlette and FastAPI helpers: a 422 for bad job arguments, the app's `Jobs` for a handler,
and the asynchronous request-reply pattern (202 + `Location`, a status route, an event stream).

- `job_arguments_error_handler`: turns `JobArgumentsError` into a 422 in FastAPI's error shape;
  `app.add_exception_handler(JobArgumentsError, job_arguments_error_handler)` in either framework.
  It answers `IdempotencyKeyReusedError`, a `JobArgumentsError`, too.
- `get_jobs(request)`: the `Jobs` that `jobs.lifespan` started; a FastAPI dependency as it is.
- `accepted(request, job_id)`: 202 with `Location` (the job's status URL) and `Retry-After`.
- `job_status_router()`: mount it (`Mount("/jobs", app=...)`, FastAPI's `app.mount`): `GET
  /{job_id}` shows the job's public fields (`public_fields`, or a function of yours), `GET
  /{job_id}/events` streams them as server-sent events until the job ends.
- `add_job_status_routes(app)`: the same two routes as path operations of a FastAPI app or
  `APIRouter`, so that they show in its OpenAPI schema.
- Who may see a job: ids are sequential, so both take `authorize=` (a function of the request
  and the job's record; a job it refuses answers 404, as a missing one does), `tokens=` (a
  `JobStatusTokens`: status URLs hold an HMAC-signed token that cannot be guessed, not the id),
  and `add_job_status_routes` FastAPI's `dependencies=`.

None of it imports FastAPI: a FastAPI app is a Starlette app, and these work on both
(`add_job_status_routes` calls the app's `add_api_route`, whatever its class). The event
stream needs `sse-starlette` (the `sse` extra); see docs/fastapi.md.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pydantic_core
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import NoMatchFound, Route, Router

from .._errors import DatabaseUnavailableError, JobArgumentsError, NotStartedError
from .._job import JobId
from .._jobs import Jobs
from .._records import JobRecord, JobStatus
from ._status_tokens import JobStatusTokens

__all__ = [
    "Authorize",
    "JobStatusTokens",
    "accepted",
    "add_job_status_routes",
    "get_jobs",
    "job_arguments_error_handler",
    "job_status_router",
    "public_fields",
]

logger = logging.getLogger("starlette_jobs")

PublicFields = Callable[[JobRecord], Mapping[str, Any]]
"""What the status route shows of a job: a function of its record to a JSON-ready mapping."""

Authorize = Callable[[Request, JobRecord], bool | Awaitable[bool]]
"""Whether this request may see this job (sync or async): a job it may not see answers 404 on
the status route and the event stream, exactly as a job that does not exist."""

STATUS_ROUTE = "job_status"
"""The name of the status route, for `request.url_for(STATUS_ROUTE, job_id=...)` (or
`job_token=...` when the routes take `JobStatusTokens`)."""
EVENTS_ROUTE = "job_events"


def get_jobs(request: Request) -> Jobs:
    """The `Jobs` that `jobs.lifespan` started for this app: from the lifespan state, else from
    `app.state.jobs`.

    In FastAPI it is a dependency as it is: `jobs: Annotated[Jobs, Depends(get_jobs)]`.

    Raises:
        NotStartedError: the app's lifespan started no `Jobs` (pass `lifespan=jobs.lifespan`).
    """
    jobs = getattr(request.state, "jobs", None)
    if not isinstance(jobs, Jobs):
        jobs = getattr(getattr(request.scope.get("app"), "state", None), "jobs", None)
    if not isinstance(jobs, Jobs):
        raise NotStartedError(
            "this app's lifespan started no Jobs: pass `lifespan=jobs.lifespan` to the app "
            "(or nest `jobs.lifespan(app)` in your own lifespan)"
        )
    return jobs


async def job_arguments_error_handler(request: Request, exc: Exception) -> Response:
    """Answers a `JobArgumentsError` with 422 and the errors in FastAPI's own shape:
    `{"detail": [{"type", "loc", "msg", "input"}, ...]}`, each `loc` starting with `"body"` as
    FastAPI's errors about a JSON body's fields do, followed by the argument's name.

    An `IdempotencyKeyReusedError` (an `Idempotency-Key` sent again with another body) is a
    `JobArgumentsError` too: one error of type `idempotency_key_reused` at `["body"]`.

    Install it in one line, in Starlette or FastAPI:
    `app.add_exception_handler(JobArgumentsError, job_arguments_error_handler)`, or
    `exception_handlers={JobArgumentsError: job_arguments_error_handler}` when building the app.
    """
    if not isinstance(exc, JobArgumentsError):
        raise exc
    detail = [_fastapi_error(error) for error in exc.errors]
    try:
        body = _json({"detail": detail})
    except ValueError:  # an input JSON cannot show (a lone surrogate and NaN together, say)
        body = _json({"detail": [{**error, "input": None} for error in detail]})
    return Response(body, status_code=422, media_type="application/json")


def _fastapi_error(error: Mapping[str, Any]) -> dict[str, Any]:
    detail = {
        "type": error.get("type", "value_error"),
        "loc": ["body", *error.get("loc", ())],
        "msg": error.get("msg", ""),
        "input": error.get("input"),
    }
    if "ctx" in error:
        detail["ctx"] = error["ctx"]
    return detail


def accepted(
    request: Request,
    job_id: JobId,
    *,
    retry_after: int = 1,
    location: str | None = None,
    headers: Mapping[str, str] | None = None,
    tokens: JobStatusTokens | None = None,
) -> JSONResponse:
    """The answer to a request whose work a job does: `202 Accepted`, with the job's status URL
    in `Location` and how long to wait before looking in `Retry-After`.

    Args:
        request: the request being answered, to build the status URL from.
        job_id: what `enqueue` returned.
        retry_after: seconds before the client should look at the status URL.
        location: the status URL; by default the `job_status_router()` mounted in this app
            (or its routes, added by `add_job_status_routes`).
        headers: more headers for the response.
        tokens: the `JobStatusTokens` the status routes were given: the status URL then holds
            the job's token, which cannot be guessed, rather than its id.

    Returns:
        A JSON response `{"job_id": ..., "status_url": ...}`.

    Raises:
        LookupError: no `location` given and no `job_status_router()` mounted in this app, or
            its routes take tokens and no `tokens` were given (or the other way round).
        ValueError: `retry_after` is not a whole number of seconds >= 0.

    Example:
        >>> job_id = await build_report.enqueue(month="2026-01")
        >>> return accepted(request, job_id)
    """
    _check_retry_after(retry_after)
    if location is None:
        location = _status_url(request, job_id, tokens)
    return JSONResponse(
        {"job_id": job_id, "status_url": location},
        status_code=202,
        headers={**(headers or {}), "Location": location, "Retry-After": str(retry_after)},
    )


def _status_url(request: Request, job_id: JobId, tokens: JobStatusTokens | None) -> str:
    # The routes name their parameter `job_token` when they take tokens: a URL built for the
    # other kind matches no route, and says so, rather than pointing where nothing answers.
    try:
        if tokens is None:
            return str(request.url_for(STATUS_ROUTE, job_id=str(job_id)))
        return str(request.url_for(STATUS_ROUTE, job_token=tokens.token(int(job_id))))
    except NoMatchFound:
        raise LookupError(
            "accepted() needs the job's status URL: mount job_status_router() in this app "
            "(app.mount('/jobs', job_status_router())), add its routes to a FastAPI app "
            "(add_job_status_routes(app)), or pass location=; if the routes were given "
            "tokens=JobStatusTokens(...), pass the same tokens= to accepted() (and none if not)"
        ) from None


def public_fields(record: JobRecord) -> dict[str, Any]:
    """What the status route shows of a job by default: its id, status, timestamps, attempts,
    progress and, once it succeeded, its result. Never its arguments, name or errors (they may
    hold what only the server should see): pass a function of your own to show more or less.
    """
    fields: dict[str, Any] = {
        "id": record.id,
        "status": record.status.value,
        "attempts": record.attempts,
        "progress": record.progress,
        "created_at": record.created_at.isoformat(),
        "run_at": record.run_at.isoformat(),
        "started_at": None if record.started_at is None else record.started_at.isoformat(),
        "finished_at": None if record.finished_at is None else record.finished_at.isoformat(),
    }
    if record.status is JobStatus.SUCCEEDED:
        fields["result"] = record.result
    return fields


def job_status_router(
    *,
    public: PublicFields = public_fields,
    events: bool = True,
    retry_after: int = 1,
    progress_interval: float = 1.0,
    authorize: Authorize | None = None,
    tokens: JobStatusTokens | None = None,
) -> Router:
    """Routes that show jobs to the clients that enqueued them, to mount where you like:
    `Mount("/jobs", app=job_status_router())` in Starlette, `app.mount("/jobs",
    job_status_router())` in FastAPI (or `add_job_status_routes`, to have them in FastAPI's
    OpenAPI schema).

    - `GET /{job_id}`: the job's public fields as JSON (404 for an id that is no job's, 503
      while the database cannot be reached), with `Retry-After` while it has not finished
      (the time until it is due, if that is later). `GET /{job_token}` with `tokens`.
    - `GET /{job_id}/events`: server-sent events, one with the public fields each time they
      change (`event: status` or `event: progress`), and a last one (`event: end`) once the job
      has finished; then the stream closes.

    Args:
        public: what to show of a job (default `public_fields`).
        events: whether to serve the event stream (it needs the `sse` extra).
        retry_after: the `Retry-After` of an unfinished job, in seconds.
        progress_interval: seconds between two looks at a running job's progress; its end is
            announced by the database at once.
        authorize: whether a request may see a job, a function (sync or async) of the
            request and the job's record. Ids are sequential: without it (or `tokens`), whoever
            can reach the routes can read every job's public fields. A job it refuses answers
            404, exactly as a job that does not exist.
        tokens: a `JobStatusTokens`: the routes take the job's token (which cannot be guessed)
            in place of its id, and answer 404 to anything else; give `accepted()` the same.

    Raises:
        ImportError: `events` and sse-starlette is not installed.
    """
    _check_settings(retry_after, progress_interval)
    find = _JobFinder(authorize, tokens)
    routes = [
        Route(f"/{find.parameter}", _status_endpoint(find, public, retry_after), name=STATUS_ROUTE)
    ]
    if events:
        stream = _events_endpoint(find, public, retry_after, progress_interval)
        routes.append(Route(f"/{find.parameter}/events", stream, name=EVENTS_ROUTE))
    return Router(routes)


def add_job_status_routes(
    app: object,
    prefix: str = "/jobs",
    *,
    public: PublicFields = public_fields,
    events: bool = True,
    retry_after: int = 1,
    progress_interval: float = 1.0,
    tags: Sequence[str] | str = ("jobs",),
    authorize: Authorize | None = None,
    tokens: JobStatusTokens | None = None,
    dependencies: Sequence[Any] = (),
) -> None:
    """Adds the routes of `job_status_router()` to a FastAPI app or `APIRouter` as path
    operations, so that they show in its OpenAPI schema: `GET {prefix}/{job_id}` and, with
    `events`, `GET {prefix}/{job_id}/events`. They answer as the mounted router's do, under
    the same route names (`accepted()` finds them), except that FastAPI answers 422 for a
    `job_id` that is no possible id (where the router answers 404).

    Args:
        app: a `FastAPI` app or an `APIRouter` (anything with FastAPI's `add_api_route`).
        prefix: the path the routes start with: `""`, or one starting with `/` and not ending
            with one.
        public: what to show of a job (default `public_fields`).
        events: whether to serve the event stream (it needs the `sse` extra).
        retry_after: the `Retry-After` of an unfinished job, in seconds.
        progress_interval: seconds between two looks at a running job's progress.
        tags: the OpenAPI tags of the two operations.
        authorize: whether a request may see a job, as for `job_status_router()`: a job it
            refuses answers 404, as a job that does not exist.
        tokens: a `JobStatusTokens`: the routes take `{job_token}` in place of `{job_id}`.
        dependencies: FastAPI dependencies (`[Depends(current_user)]`) run before each route,
            as `add_api_route` runs them: one may refuse the request (raise `HTTPException`),
            or put what `authorize` needs in `request.state`.

    Raises:
        TypeError: `app` has no `add_api_route` (a plain Starlette app: mount
            `job_status_router()` instead).
        ValueError: a `prefix`, `retry_after` or `progress_interval` that cannot work.
        ImportError: `events` and sse-starlette is not installed.

    Example:
        >>> app = FastAPI(lifespan=jobs.lifespan)
        >>> add_job_status_routes(app, "/jobs")
    """
    # Duck-typed, so that this module never imports FastAPI.
    add_api_route = getattr(app, "add_api_route", None)
    if not callable(add_api_route):
        raise TypeError(
            "add_job_status_routes() takes a FastAPI app or APIRouter (it calls add_api_route), "
            f"got {type(app).__name__}; in a Starlette app, mount job_status_router() instead"
        )
    if prefix and (not prefix.startswith("/") or prefix.endswith("/")):
        raise ValueError(f"prefix must start with '/' and not end with one, got {prefix!r}")
    _check_settings(retry_after, progress_interval)
    tag_list = [tags] if isinstance(tags, str) else list(tags)  # "jobs", not j, o, b, s
    find = _JobFinder(authorize, tokens)
    show = _status_endpoint(find, public, retry_after)

    # FastAPI reads these signatures: `job_id: JobId` is validated (422 for what is no id) and
    # documented as an integer with bounds. The shared endpoint reads the same path parameter
    # as the mounted router's, so that both answer alike.
    async def job_status(request: Request, job_id: JobId) -> Response:
        """The job's public fields, with `Retry-After` while it has not finished."""
        return await show(request)

    async def job_status_by_token(request: Request, job_token: str) -> Response:
        """The job's public fields, with `Retry-After` while it has not finished."""
        return await show(request)

    add_api_route(
        f"{prefix}/{find.parameter}",
        job_status if tokens is None else job_status_by_token,
        methods=["GET"],
        dependencies=list(dependencies),
        name=STATUS_ROUTE,
        response_model=None,
        summary="Show a job",
        tags=tag_list,
        responses=_documented_responses(
            "The job's public fields.",
            headers={
                "Retry-After": {
                    **_RETRY_AFTER_HEADER,
                    "description": "While the job has not finished: seconds before looking again.",
                },
                "Cache-Control": {"description": "`no-store`", "schema": {"type": "string"}},
            },
        ),
    )
    if events:
        stream = _events_endpoint(find, public, retry_after, progress_interval)

        async def job_events(request: Request, job_id: JobId) -> Response:
            """Server-sent events: `status` with the job's public fields, then `status` or
            `progress` each time they change, and `end` once the job has finished; then the
            stream closes."""
            return await stream(request)

        async def job_events_by_token(request: Request, job_token: str) -> Response:
            """Server-sent events: `status` with the job's public fields, then `status` or
            `progress` each time they change, and `end` once the job has finished; then the
            stream closes."""
            return await stream(request)

        add_api_route(
            f"{prefix}/{find.parameter}/events",
            job_events if tokens is None else job_events_by_token,
            methods=["GET"],
            dependencies=list(dependencies),
            name=EVENTS_ROUTE,
            response_model=None,
            response_class=_EventStreamInSchema,
            summary="Stream a job's status and progress",
            tags=tag_list,
            responses=_documented_responses("The job's updates, until it ends."),
        )


class _EventStreamInSchema(Response):
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
_RETRY_AFTER_HEADER = {
    "description": "Seconds to wait before looking again.",
    "schema": {"type": "integer"},
}


def _documented_responses(
    success: str, headers: Mapping[str, Any] | None = None
) -> dict[int | str, dict[str, Any]]:
    return {
        200: {"description": success, **({"headers": dict(headers)} if headers else {})},
        404: {"description": "No job has this id.", "content": _DETAIL_JSON},
        503: {
            "description": "The job store cannot be reached; try again later.",
            "content": _DETAIL_JSON,
            "headers": {"Retry-After": _RETRY_AFTER_HEADER},
        },
    }


_Endpoint = Callable[[Request], Awaitable[Response]]


class _JobFinder:
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


def _status_endpoint(find: _JobFinder, public: PublicFields, retry_after: int) -> _Endpoint:
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
        return Response(_json(public(record)), media_type="application/json", headers=headers)

    return show


def _events_endpoint(
    find: _JobFinder, public: PublicFields, retry_after: int, progress_interval: float
) -> _Endpoint:
    from ._sse import events_response  # the one import of sse-starlette

    async def stream(request: Request) -> Response:
        try:
            jobs, record = await find(request)
        except DatabaseUnavailableError as error:
            return _unavailable(error, retry_after)
        if record is None:
            return _not_found(request)
        return events_response(jobs, record, public, progress_interval, _json)

    return stream


def _check_settings(retry_after: int, progress_interval: float) -> None:
    _check_retry_after(retry_after)
    # A comparison that NaN fails, so that it is refused too.
    if not (isinstance(progress_interval, int | float) and progress_interval > 0):
        raise ValueError(f"progress_interval must be > 0 seconds, got {progress_interval!r}")


def _check_retry_after(retry_after: int) -> None:
    # HTTP's Retry-After is a whole number of seconds.
    if type(retry_after) is not int or retry_after < 0:
        raise ValueError(f"retry_after must be a whole number of seconds >= 0, got {retry_after!r}")


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


def _json(content: Any) -> bytes:
    """JSON of what a handler shows: datetimes, decimals, models and the like as pydantic shows
    them, NaN as null, anything else as its repr. A lone surrogate (which UTF-8 cannot encode)
    is escaped. Raises ValueError if nothing works (nested too deeply, say)."""
    try:
        return pydantic_core.to_json(content, fallback=repr, inf_nan_mode="null")
    except ValueError:
        plain = pydantic_core.to_jsonable_python(content, fallback=repr)
        return json.dumps(plain, ensure_ascii=True, allow_nan=False).encode()
