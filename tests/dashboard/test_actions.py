"""The dashboard's actions, as an operator's browser posts them: allowed by the hook, refused by
it, refused without it (read-only), and refused without the form's CSRF token."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
import pytest
from starlette.requests import Request

from starlette_jobs import EventKind, JobStatus
from starlette_jobs.dashboard import Dashboard
from tests.dashboard.pages import rows
from tests.dashboard.seeded import Calls, Seeded, allow_but_cancel, app_of


def client_of(dashboard: Dashboard) -> httpx2.AsyncClient:
    transport = httpx2.ASGITransport(app=app_of(dashboard))
    return httpx2.AsyncClient(transport=transport, base_url="http://test")


@pytest.fixture
async def calls() -> Calls:
    return []


@pytest.fixture
async def acting(seeded: Seeded, calls: Calls) -> AsyncIterator[httpx2.AsyncClient]:
    """A client of a dashboard with the hook; dash-mail is paused, so that a job made pending
    stays so while the test looks at it."""
    await seeded.jobs.pause("dash-mail")
    async with client_of(Dashboard(seeded.jobs, authorize=allow_but_cancel(calls))) as client:
        yield client


def token_of(html: str) -> str:
    tokens: set[str] = set(re.findall(r'name="csrf_token" value="([^"]+)"', html))
    assert len(tokens) == 1, tokens
    return tokens.pop()


async def post(client: httpx2.AsyncClient, page: str, action: str) -> httpx2.Response:
    """Posts the form of `action` on `page` (its path under /ops), as a browser would."""
    html = (await client.get(page)).text
    return await client.post(f"/ops{action}", data={"csrf_token": token_of(html)})


async def status_of(seeded: Seeded, job_id: int) -> JobStatus:
    record = await seeded.jobs.get(job_id)
    assert record is not None
    return record.status


async def test_retrying_a_failed_job_makes_it_pending_and_logs_who(
    seeded: Seeded, acting: httpx2.AsyncClient, calls: Calls, caplog: pytest.LogCaptureFixture
) -> None:
    page = f"/ops/jobs/{seeded.failed}"
    html = (await acting.get(page)).text
    assert re.findall(r'class="action (\w+)"', html) == ["retry"]  # what its status allows
    with caplog.at_level(logging.INFO, "starlette_jobs.dashboard"):
        response = await post(acting, page, f"/jobs/{seeded.failed}/retry")
    assert response.status_code == 303
    assert response.headers["location"] == f"{page}?action=retry&outcome=changed"
    assert await status_of(seeded, seeded.failed) == JobStatus.PENDING
    assert calls == [("retry", "dash-mail")]
    assert f"ada@example.com: retry job {seeded.failed}: changed" in caplog.text
    html = (await acting.get(response.headers["location"])).text
    assert '<p class="done" id="done">retry: done</p>' in html
    # The audit trail: the event names who the hook said asks, in the job's history and page.
    assert [row[1] for row in rows(html, "event")][-1] == "retried"
    assert rows(html, "event")[-1][-1] == "ada@example.com"
    events = await seeded.jobs.events(seeded.failed)
    assert (events[-1].kind, events[-1].by) == (EventKind.RETRIED, "ada@example.com")


async def test_an_action_the_status_does_not_allow_changes_nothing(
    seeded: Seeded, acting: httpx2.AsyncClient
) -> None:
    page = f"/ops/jobs/{seeded.sent[0]}"  # no button: the form is forged with the overview's token
    response = await post(acting, "/ops/", f"/jobs/{seeded.sent[0]}/retry")
    assert response.headers["location"] == f"{page}?action=retry&outcome=unchanged"
    html = (await acting.get(response.headers["location"])).text
    assert "retry: not done: the job&#39;s status does not allow it" in html
    assert await status_of(seeded, seeded.sent[0]) == JobStatus.SUCCEEDED


async def test_an_action_the_hook_refuses_is_a_403_and_changes_nothing(
    seeded: Seeded, acting: httpx2.AsyncClient, calls: Calls
) -> None:
    response = await post(acting, f"/ops/jobs/{seeded.delayed}", f"/jobs/{seeded.delayed}/cancel")
    assert response.status_code == 403
    assert "you may not cancel on queue &#39;dash-mail&#39;" in response.text
    assert await status_of(seeded, seeded.delayed) == JobStatus.PENDING
    assert calls == [("cancel", "dash-mail")]


async def test_pausing_and_resuming_a_queue_from_the_overview(
    seeded: Seeded, acting: httpx2.AsyncClient, calls: Calls
) -> None:
    response = await post(acting, "/ops/", "/queues/dash-reports/pause")
    assert (response.status_code, response.headers["location"]) == (303, "/ops/")
    assert (await seeded.jobs.queue_controls("dash-reports")).paused
    html = (await acting.get("/ops/")).text
    assert 'action="/ops/queues/dash-reports/resume"' in html
    await post(acting, "/ops/", "/queues/dash-reports/resume")
    assert not (await seeded.jobs.queue_controls("dash-reports")).paused
    assert calls == [("pause", "dash-reports"), ("resume", "dash-reports")]


async def test_an_async_hook_is_awaited(seeded: Seeded) -> None:
    async def authorize(request: Request, action: str, queue: str) -> bool:
        return request.headers.get("x-role") == "admin"

    async with client_of(Dashboard(seeded.jobs, authorize=authorize)) as client:
        page, action = f"/ops/jobs/{seeded.delayed}", f"/jobs/{seeded.delayed}/cancel"
        assert (await post(client, page, action)).status_code == 403
        client.headers["x-role"] = "admin"
        assert (await post(client, page, action)).status_code == 303
    assert await status_of(seeded, seeded.delayed) == JobStatus.CANCELLED


@pytest.mark.parametrize("answer", [None, "", 1])
async def test_a_hook_that_does_not_allow_plainly_refuses(seeded: Seeded, answer: object) -> None:
    def authorize(*_: object) -> Any:
        return answer

    async with client_of(Dashboard(seeded.jobs, authorize=authorize)) as client:
        response = await post(client, f"/ops/jobs/{seeded.failed}", f"/jobs/{seeded.failed}/retry")
    assert response.status_code == 403
    assert await status_of(seeded, seeded.failed) == JobStatus.FAILED


async def test_without_a_hook_the_dashboard_is_read_only(
    seeded: Seeded, client: httpx2.AsyncClient
) -> None:
    html = (await client.get(f"/ops/jobs/{seeded.failed}")).text
    assert '<form method="post"' not in html
    assert "csrf" not in html
    assert "starlette_jobs_csrf" not in (await client.get("/ops/")).headers.get("set-cookie", "")
    response = await client.post(f"/ops/jobs/{seeded.failed}/retry", data={"csrf_token": "x"})
    assert response.status_code == 403
    assert "read-only" in response.text
    assert await status_of(seeded, seeded.failed) == JobStatus.FAILED


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(lambda client, token: {}, id="no token"),
        pytest.param(lambda client, token: {"csrf_token": token + "x"}, id="another token"),
        pytest.param(
            lambda client, token: client.cookies.clear() or {"csrf_token": token}, id="no cookie"
        ),
    ],
)
async def test_a_form_without_its_token_is_refused(
    seeded: Seeded,
    acting: httpx2.AsyncClient,
    calls: Calls,
    forge: Callable[[httpx2.AsyncClient, str], dict[str, str]],
) -> None:
    token = token_of((await acting.get(f"/ops/jobs/{seeded.failed}")).text)
    response = await acting.post(f"/ops/jobs/{seeded.failed}/retry", data=forge(acting, token))
    assert response.status_code == 403
    assert "the form has expired" in response.text
    assert await status_of(seeded, seeded.failed) == JobStatus.FAILED
    assert calls == []  # refused before the hook is asked


async def test_a_cookie_signed_by_another_dashboard_is_refused(seeded: Seeded) -> None:
    async with client_of(Dashboard(seeded.jobs, authorize=lambda *_: True, secret="a")) as one:
        token = token_of((await one.get(f"/ops/jobs/{seeded.failed}")).text)
        cookies = one.cookies
    async with client_of(Dashboard(seeded.jobs, authorize=lambda *_: True, secret="b")) as two:
        two.cookies = cookies
        response = await two.post(f"/ops/jobs/{seeded.failed}/retry", data={"csrf_token": token})
    assert response.status_code == 403


@pytest.mark.parametrize(
    ("action", "status", "message"),
    [
        ("/jobs/99999999/retry", 404, "no job 99999999"),
        ("/jobs/abc/release", 404, "no job abc"),
        ("/jobs/1/delete", 404, "no action is called &#39;delete&#39;"),
        ("/queues/dash-mail/drop", 404, "no action is called &#39;drop&#39;"),
    ],
)
async def test_what_names_no_action_is_not_found(
    acting: httpx2.AsyncClient, action: str, status: int, message: str
) -> None:
    response = await post(acting, "/ops/", action)
    assert response.status_code == status
    assert message in response.text


async def test_reading_a_page_is_not_an_action(acting: httpx2.AsyncClient) -> None:
    response = await acting.get("/ops/jobs/1/retry")
    assert response.status_code == 405
