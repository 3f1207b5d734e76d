"""The dashboard as an attacker and a careless operator meet it: garbage in every path and
query parameter is a 4xx page, never a 500; a read-only dashboard refuses every POST and shows
no form; mounted under a prefix behind a proxy's root_path, every link and form goes there."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from starlette_jobs.dashboard import Dashboard
from tests.dashboard.seeded import Seeded, app_of


def client_of(app: Starlette, root_path: str = "") -> httpx2.AsyncClient:
    # The app's errors answered as a browser gets them (a 500 page), not raised in the test.
    transport = httpx2.ASGITransport(app=app, raise_app_exceptions=False, root_path=root_path)
    return httpx2.AsyncClient(transport=transport, base_url="http://test")


@pytest.fixture
async def acting(seeded: Seeded) -> AsyncIterator[httpx2.AsyncClient]:
    async with client_of(app_of(Dashboard(seeded.jobs, authorize=lambda *_: "ada"))) as client:
        yield client


@pytest.fixture
async def read_only(seeded: Seeded) -> AsyncIterator[httpx2.AsyncClient]:
    async with client_of(app_of(Dashboard(seeded.jobs))) as client:
        yield client


def tokens_of(html: str) -> list[str]:
    return re.findall(r'name="csrf_token" value="([^"]+)"', html)


HUGE = "9" * 40
GARBAGE_GETS = [
    *(f"/ops/jobs/{text}" for text in ("%00", "1%00", "-1", HUGE, "%D9%A3", "1e3", "%20", "0x1")),
    *(
        f"/ops/jobs?{query}"
        for query in (
            "queue=%00",
            "name=a%00b",
            "correlation_id=%00",
            "status=%00",
            "status=bogus",
            "before=%00",
            f"before={HUGE}",
            "before=-1",
            "before=1.5",
            "id=%00",
            f"id={HUGE}",
            "trace_id=%00",
            "trace_id=zz",
        )
    ),  # fmt: skip
    *(f"/ops/workflows?before={text}" for text in ("%00", "-5", HUGE)),
    *(f"/ops/workflows/{text}" for text in ("%00", "-1", HUGE, "%D9%A3")),
    *(f"/ops/bulk/{text}" for text in ("%00", "-1", HUGE, "%D9%A3")),
    "/ops/static/%2e%2e/_app.py",
    "/ops/nothing",
]


@pytest.mark.parametrize("path", GARBAGE_GETS)
async def test_garbage_in_a_page_is_answered_with_a_4xx_page(
    read_only: httpx2.AsyncClient, path: str
) -> None:
    response = await read_only.get(path)
    assert 400 <= response.status_code < 500, (response.status_code, response.text[-300:])
    assert "Traceback" not in response.text


@pytest.mark.parametrize("query", ["queue=%ff%fe", "name=%3Cscript%3E", "queue=" + "x" * 4000])
async def test_text_no_job_holds_is_a_list_of_no_job(
    read_only: httpx2.AsyncClient, query: str
) -> None:
    response = await read_only.get(f"/ops/jobs?{query}")
    assert response.status_code == 200
    assert "No job matches." in response.text
    assert "<script>" not in response.text


@pytest.mark.parametrize(
    "path",
    [
        "/ops/jobs/1/retry",
        "/ops/queues/dash-mail/pause",
        "/ops/bulk-actions/retry",
        "/ops/bulk/1/run",
    ],
)
async def test_a_get_on_an_action_changes_nothing(
    seeded: Seeded, acting: httpx2.AsyncClient, path: str
) -> None:
    assert (await acting.get(path)).status_code == 405
    assert not (await seeded.jobs.queue_controls("dash-mail")).paused


@pytest.mark.parametrize("queue", ["%00", "a%2Fb", "a/b", "", "%3Cscript%3E", "x" * 49])
@pytest.mark.parametrize("action", ["pause", "resume"])
async def test_no_queue_can_be_called_so_is_a_404_page(
    acting: httpx2.AsyncClient, queue: str, action: str
) -> None:
    token = tokens_of((await acting.get("/ops/")).text)[0]
    response = await acting.post(f"/ops/queues/{queue}/{action}", data={"csrf_token": token})
    assert response.status_code == 404, (response.status_code, response.text[-300:])
    assert "no queue can be called" in response.text
