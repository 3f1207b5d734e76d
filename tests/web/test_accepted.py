"""`web/_accepted.py`: `accepted`, the 202 with the job's status URL and when to look."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient

from starlette_jobs.web import (
    accepted,
)
from tests.web.reports import starlette_app

# -- accepted ------------------------------------------------------------------------------------


def test_accepted_answers_202_with_the_status_url_and_when_to_look(client: TestClient) -> None:
    response = client.post("/reports", json={"month": "2026-01", "pages": 2})
    assert response.status_code == 202
    job_id = response.json()["job_id"]
    assert response.headers["location"] == f"http://testserver/jobs/{job_id}"
    assert response.headers["retry-after"] == "1"
    assert response.json() == {"job_id": job_id, "status_url": response.headers["location"]}
    assert client.get(response.headers["location"]).json()["status"] == "pending"


def test_accepted_takes_a_location_and_says_when_it_has_none(database_dsn: str) -> None:
    async def elsewhere(request: Request) -> Response:
        return accepted(request, 7, location="/reports/7", retry_after=30, headers={"X-A": "b"})

    async def nowhere(request: Request) -> Response:
        return accepted(request, 7)

    app = Starlette(routes=[Route("/elsewhere", elsewhere), Route("/nowhere", nowhere)])
    with TestClient(app) as client:
        response = client.get("/elsewhere")
        assert (response.headers["location"], response.headers["retry-after"]) == (
            "/reports/7",
            "30",
        )
        assert response.headers["x-a"] == "b"
        with pytest.raises(LookupError, match="mount job_status_router"):
            client.get("/nowhere")
    request = Request({"type": "http", "method": "POST", "path": "/", "headers": []})
    with pytest.raises(ValueError, match="retry_after"):
        accepted(request, 7, location="/jobs/7", retry_after=0.5)  # type: ignore[arg-type]


def test_accepted_follows_the_apps_root_path(database_dsn: str) -> None:
    app = starlette_app(database_dsn)
    with TestClient(app, root_path="/api") as client:
        response = client.post("/reports", json={"month": "2026-01", "pages": 1})
        job_id = response.json()["job_id"]
        assert response.headers["location"] == f"http://testserver/api/jobs/{job_id}"


def test_headers_named_in_lower_case_do_not_duplicate_location_or_retry_after(
    database_dsn: str,
) -> None:
    """`headers={"location": ...}` sent two Location headers, and two Retry-After: which one a
    client follows is its own guess. The ones `accepted` makes win: `location=` and
    `retry_after=` set them."""

    async def answer(request: Request) -> Response:
        headers = {"location": "/elsewhere", "RETRY-AFTER": "99", "x-a": "b"}
        return accepted(request, 7, location="/reports/7", retry_after=5, headers=headers)

    with TestClient(Starlette(routes=[Route("/", answer)])) as client:
        response = client.get("/")
    assert response.headers.get_list("location") == ["/reports/7"]
    assert response.headers.get_list("retry-after") == ["5"]
    assert response.headers["x-a"] == "b"
