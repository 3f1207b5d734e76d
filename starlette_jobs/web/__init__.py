"""Starlette and FastAPI helpers: a 422 for bad job arguments, the app's `Jobs` for a handler,
and the asynchronous request-reply pattern (202 + `Location`, a status route, an event stream).

- `job_arguments_error_handler`: turns `JobArgumentsError` into a 422 in FastAPI's error shape;
  `app.add_exception_handler(JobArgumentsError, job_arguments_error_handler)` in either framework.
  It answers `IdempotencyKeyReusedError`, a `JobArgumentsError`, too.
- `database_unavailable_handler`: turns `DatabaseUnavailableError` into a 503 with
  `Retry-After`; `app.add_exception_handler(DatabaseUnavailableError, ...)`.
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

from ._accepted import accepted as accepted
from ._handlers import database_unavailable_handler as database_unavailable_handler
from ._handlers import get_jobs as get_jobs
from ._handlers import job_arguments_error_handler as job_arguments_error_handler
from ._status_routes import add_job_status_routes as add_job_status_routes
from ._status_routes import job_status_router as job_status_router
from ._status_routes import public_fields as public_fields
from ._status_tokens import JobStatusTokens as JobStatusTokens
from ._types import Authorize as Authorize

__all__ = [
    "Authorize",
    "JobStatusTokens",
    "accepted",
    "add_job_status_routes",
    "database_unavailable_handler",
    "get_jobs",
    "job_arguments_error_handler",
    "job_status_router",
    "public_fields",
]
