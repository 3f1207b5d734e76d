"""The web app: `POST /reports` enqueues a report and answers 202; `GET /reports/{id}` returns
it once built; `GET /jobs/{id}` and `GET /jobs/{id}/events` show its status and progress."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Body, Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse

from starlette_jobs import (
    CorrelationIdMiddleware,
    DatabaseUnavailableError,
    JobArgumentsError,
    JobId,
    Jobs,
)
from starlette_jobs.web import (
    accepted,
    database_unavailable_handler,
    get_jobs,
    job_arguments_error_handler,
    job_status_router,
)

from .jobs import build_report

# DATABASE_URL if set, else an embedded PostgreSQL of this example's own, in
# .starlette_jobs/example_fastapi: the other example's jobs do not take the ids its
# walkthrough shows.
jobs = Jobs(
    queues={"default": 10, "reports": 2}, embedded_data_dir=".starlette_jobs/example_fastapi"
)

app = FastAPI(title="starlette-jobs FastAPI example", lifespan=jobs.lifespan)
app.add_middleware(CorrelationIdMiddleware)
app.add_exception_handler(JobArgumentsError, job_arguments_error_handler)
app.add_exception_handler(DatabaseUnavailableError, database_unavailable_handler)
app.mount("/jobs", job_status_router())

JobsDep = Annotated[Jobs, Depends(get_jobs)]


@app.post("/reports", status_code=202)
async def request_report(request: Request, body: Annotated[dict[str, Any], Body()]) -> JSONResponse:
    """Enqueues a report; its arguments are validated against `build_report`'s signature."""
    job_id = await build_report.enqueue(**body)
    return accepted(request, job_id)


@app.get("/reports/{job_id}")
async def get_report(job_id: JobId, jobs: JobsDep) -> dict[str, object]:
    """The report, once built: 409 while it is not, 404 for what is no report."""
    record = await jobs.get(job_id)
    if record is None or record.name != build_report.name:
        raise HTTPException(404, "no such report")
    if record.status != "succeeded":
        raise HTTPException(409, f"the report is {record.status}")
    return await jobs.result(build_report, job_id)
