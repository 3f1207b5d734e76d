"""The web app: `POST /signup` enqueues jobs, `GET /jobs` and `GET /jobs/{id}` show them."""

from __future__ import annotations

from json import JSONDecodeError

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from starlette_jobs import (
    CorrelationIdMiddleware,
    DatabaseUnavailableError,
    JobArgumentsError,
    Jobs,
)
from starlette_jobs.web import database_unavailable_handler

from .jobs import send_welcome_email, sync_to_crm

# DATABASE_URL if set, else an embedded PostgreSQL of this example's own, in
# .starlette_jobs/example_app: the other example's jobs do not take the ids its
# walkthrough shows.
jobs = Jobs(queues={"default": 10, "emails": 5}, embedded_data_dir=".starlette_jobs/example_app")


async def signup(request: Request) -> JSONResponse:
    try:
        body = await request.json()
    except JSONDecodeError:
        return JSONResponse({"detail": "the body must be JSON"}, status_code=400)
    if not isinstance(body, dict):
        return JSONResponse({"detail": "the body must be a JSON object"}, status_code=400)
    try:
        # Validated against send_welcome_email's signature before anything is written.
        job_id = await send_welcome_email.enqueue(**body)
    except JobArgumentsError as error:
        return JSONResponse({"detail": error.errors}, status_code=422)
    crm_job_id = await sync_to_crm.enqueue(email=body["email"])
    return JSONResponse({"job_id": str(job_id), "crm_job_id": str(crm_job_id)}, status_code=202)


async def show_job(request: Request) -> JSONResponse:
    try:
        job_id = int(request.path_params["job_id"])
    except ValueError:
        return JSONResponse({"detail": "not a job id"}, status_code=404)
    record = await jobs.get(job_id)
    if record is None:
        return JSONResponse({"detail": "no such job"}, status_code=404)
    return JSONResponse(record.to_dict())


async def list_jobs(request: Request) -> JSONResponse:
    status = request.query_params.get("status")
    records = await jobs.list(status=status, limit=50) if status else await jobs.list(limit=50)
    return JSONResponse({"jobs": [record.to_dict() for record in records]})


app = Starlette(
    routes=[
        Route("/signup", signup, methods=["POST"]),
        Route("/jobs", list_jobs),
        Route("/jobs/{job_id}", show_job),
    ],
    middleware=[Middleware(CorrelationIdMiddleware)],
    # The database away: 503 with Retry-After, not a bare 500.
    exception_handlers={DatabaseUnavailableError: database_unavailable_handler},
    lifespan=jobs.lifespan,
)
