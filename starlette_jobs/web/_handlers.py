"""For any handler: the app's `Jobs` (`get_jobs`), a 422 for bad job arguments in FastAPI's
error shape (`job_arguments_error_handler`), and a 503 while the database is away
(`database_unavailable_handler`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pydantic_core
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .._errors import DatabaseUnavailableError, JobArgumentsError, NotStartedError
from .._jobs import Jobs


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
    FastAPI's errors about a JSON body's fields do, followed by the argument's name. A missing
    argument's `input` is null (FastAPI shows the body): the arguments may hold the server's own.

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
        body = json_body({"detail": detail})
    except ValueError:  # an input JSON cannot show (a lone surrogate and NaN together, say)
        body = json_body({"detail": [{**error, "input": None} for error in detail]})
    return Response(body, status_code=422, media_type="application/json")


async def database_unavailable_handler(request: Request, exc: Exception) -> Response:
    """Answers a `DatabaseUnavailableError` (an `enqueue`, a `jobs.get`... while the database
    is away) with 503 and `Retry-After: 1`: the client may send the request again shortly,
    where without it the app answers a bare 500. `{"detail": ...}` says what failed, without
    the server's own error text (which may name hosts and databases).

    Install it in one line, in Starlette or FastAPI:
    `app.add_exception_handler(DatabaseUnavailableError, database_unavailable_handler)`.
    """
    if not isinstance(exc, DatabaseUnavailableError):
        raise exc
    return JSONResponse(
        {"detail": "the job database is unavailable for now; try again shortly"},
        status_code=503,
        headers={"Retry-After": "1"},
    )


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


def json_body(content: Any) -> bytes:
    """JSON of what a handler shows: datetimes, decimals, models and the like as pydantic shows
    them, NaN as null, anything else as its repr. A lone surrogate (which UTF-8 cannot encode)
    is escaped. Raises ValueError if nothing works (nested too deeply, say)."""
    try:
        return pydantic_core.to_json(content, fallback=repr, inf_nan_mode="null")
    except ValueError:
        plain = pydantic_core.to_jsonable_python(content, fallback=repr)
        return json.dumps(plain, ensure_ascii=True, allow_nan=False).encode()
