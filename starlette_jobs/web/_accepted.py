"""`accepted`: the 202 that answers a request whose work a job does, with `Location` (the job's
status URL, built from the status route's name) and `Retry-After`."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import NoMatchFound

from .._job import JobId
from ._status_tokens import JobStatusTokens

STATUS_ROUTE = "job_status"
"""The name of the status route, for `request.url_for(STATUS_ROUTE, job_id=...)` (or
`job_token=...` when the routes take `JobStatusTokens`)."""


EVENTS_ROUTE = "job_events"


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
        headers: more headers for the response. Their names are matched case-insensitively,
            as HTTP's are: a `Location` or `Retry-After` among them (in any case) is replaced
            by the one `accepted` sets, so pass `location=` or `retry_after=` to change those.
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
    check_retry_after(retry_after)
    if location is None:
        location = _status_url(request, job_id, tokens)
    return JSONResponse(
        {"job_id": job_id, "status_url": location},
        status_code=202,
        headers={**_others(headers), "Location": location, "Retry-After": str(retry_after)},
    )


def _others(headers: Mapping[str, str] | None) -> dict[str, str]:
    """The caller's headers but those `accepted` sets itself, in whatever case they are named:
    a dict merge is case-sensitive, and a response with two `Location` headers leaves the
    client to guess which one to follow."""
    own = {"location", "retry-after"}
    return {name: value for name, value in (headers or {}).items() if name.lower() not in own}


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


def check_retry_after(retry_after: int) -> None:
    # HTTP's Retry-After is a whole number of seconds.
    if type(retry_after) is not int or retry_after < 0:
        raise ValueError(f"retry_after must be a whole number of seconds >= 0, got {retry_after!r}")
