"""The status routes: `job_status_router()` to mount, or `add_job_status_routes(app)` for a
FastAPI app's schema; `public_fields`, what they show of a job by default."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, Router

from .._job import JobId
from .._records import JobRecord, JobStatus
from ._accepted import EVENTS_ROUTE, STATUS_ROUTE
from ._endpoints import (
    RETRY_AFTER_HEADER,
    EventStreamInSchema,
    JobFinder,
    check_settings,
    documented_responses,
    events_endpoint,
    status_endpoint,
)
from ._status_tokens import JobStatusTokens
from ._types import Authorize, PublicFields


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
    check_settings(retry_after, progress_interval)
    find = JobFinder(authorize, tokens)
    routes = [
        Route(f"/{find.parameter}", status_endpoint(find, public, retry_after), name=STATUS_ROUTE)
    ]
    if events:
        stream = events_endpoint(find, public, retry_after, progress_interval)
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
    `job_id` that is no possible id (where the router answers 404), and finds the job of
    any spelling of an id it takes (`+7`, `7.0`).

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
    check_settings(retry_after, progress_interval)
    tag_list = [tags] if isinstance(tags, str) else list(tags)  # "jobs", not j, o, b, s
    find = JobFinder(authorize, tokens)
    show = status_endpoint(find, public, retry_after)

    # FastAPI reads these signatures: `job_id: JobId` is validated (422 for what is no id) and
    # documented as an integer with bounds. The shared endpoint reads the path parameter as
    # the mounted router's does, given the validated id (see `_with_job_id`).
    async def job_status(request: Request, job_id: JobId) -> Response:
        """The job's public fields, with `Retry-After` while it has not finished."""
        return await show(_with_job_id(request, job_id))

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
        responses=documented_responses(
            "The job's public fields.",
            headers={
                "Retry-After": {
                    **RETRY_AFTER_HEADER,
                    "description": "While the job has not finished: seconds before looking again.",
                },
                "Cache-Control": {"description": "`no-store`", "schema": {"type": "string"}},
            },
        ),
    )
    if events:
        stream = events_endpoint(find, public, retry_after, progress_interval)

        async def job_events(request: Request, job_id: JobId) -> Response:
            """Server-sent events: `status` with the job's public fields, then `status` or
            `progress` each time they change, and `end` once the job has finished; then the
            stream closes."""
            return await stream(_with_job_id(request, job_id))

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
            response_class=EventStreamInSchema,
            summary="Stream a job's status and progress",
            tags=tag_list,
            responses=documented_responses("The job's updates, until it ends."),
        )


def _with_job_id(request: Request, job_id: JobId) -> Request:
    """`request` with the id FastAPI validated as its `job_id` path parameter, written as
    digits: FastAPI takes `+7`, ` 7` or `7.0` for 7, and the text as it came would be no job's
    id (a 404 where the job exists). A new request over the same connection and state, so that
    the app's own scope is left as it is."""
    path_params = {**request.path_params, "job_id": str(job_id)}
    return Request({**request.scope, "path_params": path_params}, request.receive)
