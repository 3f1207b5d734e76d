"""What the tests of `starlette_jobs.web` share: two report jobs, and a Starlette app that enqueues
them and mounts the status routes, with no worker (the tests run what was enqueued when they
choose)."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from starlette_jobs import (
    JobArgumentsError,
    Jobs,
    Retry,
    job,
)
from starlette_jobs.web import (
    accepted,
    job_arguments_error_handler,
    job_status_router,
)


@job(queue="web")
async def make_report(month: str, pages: int, note: str = "") -> dict[str, Any]:
    return {"month": month, "pages": pages}


@job(queue="web", retry=Retry.none())
async def broken_report(month: str) -> None:
    raise RuntimeError(f"secret database password in a traceback ({month})")


async def enqueue_report(request: Request) -> Response:
    body = await request.json()
    return accepted(request, await make_report.enqueue(**body))


def starlette_app(dsn: str, **router_options: Any) -> Starlette:
    return Starlette(
        routes=[
            Route("/reports", enqueue_report, methods=["POST"]),
            Mount("/jobs", app=job_status_router(events=False, **router_options)),
        ],
        exception_handlers={JobArgumentsError: job_arguments_error_handler},
        # No worker: the tests run what was enqueued when they choose (`run_enqueued_now`).
        lifespan=Jobs(dsn, queues={}).lifespan,
    )


def get_jobs_of(client: TestClient) -> Jobs:
    jobs = client.app.state.jobs  # type: ignore[attr-defined]
    assert isinstance(jobs, Jobs)
    return jobs
