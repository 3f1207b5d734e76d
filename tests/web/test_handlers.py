"""`web/_handlers.py`: the 422 handler (in FastAPI's own shape, checked against FastAPI's), and
`get_jobs`."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import pytest
from fastapi import Body, FastAPI
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.testclient import TestClient

from starlette_jobs import (
    JobArgumentsError,
    Jobs,
    JobStatus,
    NotStartedError,
    job,
)
from starlette_jobs.web import (
    get_jobs,
    job_arguments_error_handler,
)
from tests.web.reports import get_jobs_of, make_report

# -- the 422 handler -----------------------------------------------------------------------------


class ReportModel(BaseModel):
    month: str
    pages: int


def fastapi_app(dsn: str) -> FastAPI:
    app = FastAPI(lifespan=Jobs(dsn, queues={}).lifespan)
    app.add_exception_handler(JobArgumentsError, job_arguments_error_handler)

    @app.post("/by-fastapi")
    async def by_fastapi(body: ReportModel) -> None:
        """FastAPI validates the body itself."""

    @app.post("/by-job")
    async def by_job(body: Annotated[dict[str, Any], Body()]) -> None:
        await make_report.enqueue(**body)

    return app


@pytest.mark.parametrize(
    "body",
    [
        {"month": "2026-01", "pages": "many"},
        {"pages": 3},
        {"month": 7, "pages": [1]},
        {},
    ],
)
def test_bad_arguments_get_the_422_fastapi_gives_for_a_body_that_does_not_validate(
    database_dsn: str, body: dict[str, Any]
) -> None:
    with TestClient(fastapi_app(database_dsn)) as client:
        ours = client.post("/by-job", json=body)
        fastapis = client.post("/by-fastapi", json=body)
        counts = client.portal.call(get_jobs_of(client).count_by_status)  # type: ignore[union-attr]
    assert counts[JobStatus.PENDING] == 0
    assert (ours.status_code, fastapis.status_code) == (422, 422)
    assert ours.headers["content-type"] == fastapis.headers["content-type"]
    # FastAPI shows a missing field's input as the whole body; ours shows none (see below).
    expected = [
        {**error, "input": None} if error["type"] == "missing" else error
        for error in fastapis.json()["detail"]
    ]
    assert ours.json() == {"detail": expected}


SIGNING_KEY = "sk_live_SERVER_ONLY"


@job(queue="web")
async def export(owner: str, month: str, signing_key: str) -> None: ...


@pytest.mark.parametrize("body", [{}, {"month": 5}, {"month": "2026-01", "x": 1}])
def test_the_422_shows_nothing_of_the_arguments_the_server_added(
    database_dsn: str, body: dict[str, Any]
) -> None:
    """A missing argument's input was the whole arguments, the server's own ones included."""
    app = FastAPI(lifespan=Jobs(database_dsn, queues={}).lifespan)
    app.add_exception_handler(JobArgumentsError, job_arguments_error_handler)

    @app.post("/exports")
    async def create(body: Annotated[dict[str, Any], Body()]) -> None:
        await export.enqueue(**body, owner="alice", signing_key=SIGNING_KEY)

    with TestClient(app) as client:
        response = client.post("/exports", json=body)
    assert response.status_code == 422
    assert "alice" not in response.text
    assert SIGNING_KEY not in response.text


def strict_json(content: bytes) -> Any:
    """JSON as a strict client reads it: UTF-8, and no NaN or Infinity."""

    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(content.decode("utf-8"), parse_constant=refuse)


def test_the_handler_answers_what_json_cannot_hold_with_valid_json(database_dsn: str) -> None:
    @job(queue="web")
    async def take(value: Any, count: int = 0, other: int = 0) -> None: ...

    cases: dict[str, dict[str, Any]] = {
        "unstorable": {"value": "a\udc80b"},  # refused by the library, not by pydantic
        "surrogate": {"value": 1, "count": "\udc80"},
        "nan": {"value": 1, "count": math.nan},
        "object": {"value": 1, "count": object()},
        "both": {"value": 1, "count": "\udc80", "other": math.inf},
        "extra": {"value": 1, "nope": 2},
    }

    async def enqueue(request: Request) -> Response:
        await take.enqueue(**cases[request.path_params["case"]])
        return Response(status_code=204)

    app = Starlette(
        routes=[Route("/{case}", enqueue, methods=["POST"])],
        lifespan=Jobs(database_dsn, queues={}).lifespan,
    )
    app.add_exception_handler(JobArgumentsError, job_arguments_error_handler)
    with TestClient(app) as client:
        answers = {case: client.post(f"/{case}") for case in cases}
    details = {}
    for case, answer in answers.items():
        assert answer.status_code == 422, case
        details[case] = strict_json(answer.content)["detail"]
        for error in details[case]:
            assert list(error)[:4] == ["type", "loc", "msg", "input"], case
            assert error["loc"][0] == "body", case
    assert details["unstorable"][0]["loc"] == ["body", "value"]
    assert details["surrogate"][0]["input"] == "\udc80"  # escaped in the JSON text
    assert details["nan"][0]["input"] is None
    assert "object object" in details["object"][0]["input"]
    assert [error["input"] for error in details["both"]] == [None, None]  # shown without
    assert [error["loc"] for error in details["both"]] == [["body", "count"], ["body", "other"]]
    assert details["extra"][0]["loc"] == ["body", "nope"]


async def test_the_handler_leaves_other_exceptions_alone() -> None:
    request = Request({"type": "http", "method": "GET", "path": "/", "headers": []})
    with pytest.raises(KeyError):
        await job_arguments_error_handler(request, KeyError("x"))


# -- get_jobs ------------------------------------------------------------------------------------


def test_get_jobs_finds_the_lifespans_jobs_in_its_state_or_on_the_app(database_dsn: str) -> None:
    jobs = Jobs(database_dsn, queues={})

    async def which(request: Request) -> JSONResponse:
        return JSONResponse({"same": get_jobs(request) is jobs})

    @asynccontextmanager
    async def own_lifespan(app: Starlette) -> AsyncIterator[None]:
        async with jobs.lifespan(app):
            yield  # the lifespan state is not passed on: app.state.jobs is left

    for lifespan in (jobs.lifespan, own_lifespan):
        app = Starlette(routes=[Route("/", which)], lifespan=lifespan)
        with TestClient(app) as client:
            assert client.get("/").json() == {"same": True}


def test_get_jobs_says_what_to_do_when_no_lifespan_started_one() -> None:
    async def which(request: Request) -> Response:
        get_jobs(request)
        return Response()

    app = Starlette(routes=[Route("/", which)])
    with (
        TestClient(app) as client,
        pytest.raises(NotStartedError, match=r"lifespan=jobs\.lifespan"),
    ):
        client.get("/")
