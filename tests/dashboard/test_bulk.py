"""The dashboard's bulk actions through the app: the list's buttons, the hook asked once per bulk
action on its queue, the record that is its progress page and audit record, and running on one
left unfinished. (10,000 jobs in a real browser: test_browser.py.)"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta

import httpx2
import pytest
from starlette.requests import Request

from starlette_jobs import EventKind, JobStatus
from starlette_jobs.dashboard import Dashboard
from tests.conftest import eventually
from tests.dashboard.pages import rows
from tests.dashboard.seeded import Calls, Seeded, app_of


def hook(calls: Calls) -> Callable[[Request, str, str], bool | str]:
    def authorize(request: Request, action: str, queue: str) -> bool | str:
        calls.append((action, queue))
        return False if action == "bulk_cancel" else "ada@example.com"

    return authorize


@pytest.fixture
async def calls() -> Calls:
    return []


@pytest.fixture
async def acting(seeded: Seeded, calls: Calls) -> AsyncIterator[httpx2.AsyncClient]:
    # Paused: a job retried stays pending while the test looks at it.
    await seeded.jobs.pause("dash-mail")
    dashboard = Dashboard(seeded.jobs, authorize=hook(calls))
    transport = httpx2.ASGITransport(app=app_of(dashboard))
    async with httpx2.AsyncClient(transport=transport, base_url="http://test") as client:
        yield client


def form_of(html: str) -> dict[str, str]:
    """The hidden fields of the list's bulk form."""
    [form] = re.findall(r'<form class="bulk actions".*?</form>', html, re.S)
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', form))


async def finished(seeded: Seeded, bulk_id: int) -> bool:
    record = await seeded.jobs.get_bulk(bulk_id)
    return record is not None and record.finished


async def test_a_bulk_retry_of_the_filtered_list_asks_once_and_leaves_one_record(
    seeded: Seeded, acting: httpx2.AsyncClient, calls: Calls
) -> None:
    html = (await acting.get("/ops/jobs?queue=dash-mail&status=failed")).text
    assert re.findall(r'class="action bulk"[^>]*>(\w+) every matching job', html) == ["retry"]
    fields = form_of(html)
    assert (fields["queue"], fields["status"], fields["name"]) == ("dash-mail", "failed", "")

    response = await acting.post("/ops/bulk-actions/retry", data=fields)
    assert response.status_code == 303
    assert calls == [("bulk_retry", "dash-mail")]  # once, whatever the number of jobs
    page = response.headers["location"]
    bulk_id = int(page.rsplit("/", 1)[1])
    await eventually(lambda: finished(seeded, bulk_id), "the bulk retry to finish")

    html = (await acting.get(page)).text
    assert '<p id="state" class="done">finished: 1 of 1 jobs retried</p>' in html
    assert '<meta http-equiv="refresh"' not in html  # finished: no more reloads
    record = await seeded.jobs.get(seeded.failed)
    assert record is not None
    assert record.status is JobStatus.PENDING
    last = (await seeded.jobs.events(seeded.failed))[-1]
    assert (last.kind, last.by) == (EventKind.RETRIED, "ada@example.com")
    listed = rows((await acting.get("/ops/bulk")).text, "bulk")
    assert [(r[0], r[1], r[2], r[3], r[-1]) for r in listed] == [
        (str(bulk_id), "retry", "ada@example.com", "dash-mail", "1 / 1")
    ]


async def test_what_a_bulk_action_refuses(
    seeded: Seeded, acting: httpx2.AsyncClient, calls: Calls
) -> None:
    html = (await acting.get("/ops/jobs")).text
    assert 'class="bulk actions"' not in html  # no queue chosen: no bulk button
    html = (await acting.get("/ops/jobs?queue=dash-mail&status=succeeded")).text
    assert 'class="bulk actions"' not in html  # neither action changes a succeeded job
    html = (await acting.get("/ops/jobs?queue=dash-mail")).text
    fields = form_of(html)
    no_queue = await acting.post("/ops/bulk-actions/retry", data={**fields, "queue": ""})
    assert no_queue.status_code == 400
    assert "a bulk action is over one queue" in no_queue.text
    refused = await acting.post("/ops/bulk-actions/cancel", data=fields)
    assert refused.status_code == 403
    assert "you may not bulk_cancel on queue &#39;dash-mail&#39;" in refused.text
    unknown = await acting.post("/ops/bulk-actions/delete", data=fields)
    assert unknown.status_code == 404
    forged = await acting.post("/ops/bulk-actions/retry", data={**fields, "csrf_token": "x"})
    assert forged.status_code == 403
    assert calls == [("bulk_cancel", "dash-mail")]
    assert await seeded.jobs.list_bulks() == []
    assert (await acting.get("/ops/bulk/99")).status_code == 404


async def test_a_bulk_action_left_unfinished_is_run_on_from_its_page(
    seeded: Seeded, acting: httpx2.AsyncClient
) -> None:
    # Recorded, but the process that was to run it stopped before its first batch.
    record = await seeded.jobs.begin_bulk("retry", queue="dash-mail", by="grace")
    page = f"/ops/bulk/{record.id}"
    html = (await acting.get(page)).text
    assert "unfinished: the process that ran it stopped" in html
    assert '<meta http-equiv="refresh" content="1">' in html
    token = re.findall(r'name="csrf_token" value="([^"]+)"', html)[0]
    response = await acting.post(f"{page}/run", data={"csrf_token": token})
    assert response.status_code == 303
    await eventually(lambda: finished(seeded, record.id), "the bulk retry to finish")
    done = await seeded.jobs.get_bulk(record.id)
    assert done is not None
    assert (done.by, done.done, done.matched) == ("grace", 1, 1)


async def test_a_read_only_dashboard_has_no_bulk_action(seeded: Seeded) -> None:
    transport = httpx2.ASGITransport(app=app_of(Dashboard(seeded.jobs)))
    async with httpx2.AsyncClient(transport=transport, base_url="http://test") as client:
        html = (await client.get("/ops/jobs?queue=dash-mail")).text
        assert 'class="bulk actions"' not in html
        response = await client.post("/ops/bulk-actions/retry", data={"queue": "dash-mail"})
        assert response.status_code == 403


@pytest.mark.parametrize("filtered", ["trace_id=" + "a" * 32, "correlation_id=req-7"])
async def test_a_list_filtered_by_trace_or_request_offers_no_bulk_action(
    acting: httpx2.AsyncClient, filtered: str
) -> None:
    # A bulk action does not apply these filters: it would reach other jobs than those listed.
    html = (await acting.get(f"/ops/jobs?queue=dash-mail&status=failed&{filtered}")).text
    assert 'class="bulk actions"' not in html
    assert 'class="bulk actions"' in (await acting.get("/ops/jobs?queue=dash-mail")).text


async def test_a_list_bounded_by_time_offers_a_retry_of_the_jobs_finished_since(
    seeded: Seeded, acting: httpx2.AsyncClient, calls: Calls
) -> None:
    failed = await seeded.jobs.get(seeded.failed)
    assert failed is not None
    assert failed.finished_at is not None
    after = (failed.finished_at + timedelta(microseconds=1)).isoformat()
    # Finished after the failed job: nothing to retry. At or after it: the failed job.
    empty = (await acting.get("/ops/jobs", params={"queue": "dash-mail", "since": after})).text
    assert "No job matches." in empty
    html = (await acting.get("/ops/jobs?queue=dash-mail&since=1h")).text
    listed = [int(row[0]) for row in rows(html, "job")]
    assert listed == sorted([*seeded.sent, seeded.failed], reverse=True)  # not the pending one
    assert re.findall(r'class="action bulk"[^>]*>(\w+) every matching job', html) == ["retry"]
    fields = form_of(html)
    bound = datetime.fromisoformat(fields["since"])  # resolved once, when the page was asked
    assert bound <= failed.finished_at

    cancel = await acting.post("/ops/bulk-actions/cancel", data=fields)
    assert cancel.status_code == 400
    assert "a bulk cancel acts on unfinished jobs" in cancel.text
    garbage = await acting.post("/ops/bulk-actions/retry", data={**fields, "since": "1h'--"})
    assert garbage.status_code == 400
    assert "since must be an age" in garbage.text
    assert calls == []  # refused before the hook was asked

    response = await acting.post("/ops/bulk-actions/retry", data=fields)
    assert response.status_code == 303
    bulk_id = int(response.headers["location"].rsplit("/", 1)[1])
    await eventually(lambda: finished(seeded, bulk_id), "the bulk retry to finish")
    record = await seeded.jobs.get_bulk(bulk_id)
    assert record is not None
    assert (record.finished_after, record.matched, record.done) == (bound, 1, 1)
    assert "finished since" in (await acting.get(response.headers["location"])).text
    after_retry = await seeded.jobs.get(seeded.failed)
    assert after_retry is not None
    assert after_retry.status is JobStatus.PENDING


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("queue", "no such queue!", "invalid queue name"),
        ("queue", "q" * 5000, "invalid queue name"),
        ("queue", "dash\x00mail", "queue cannot hold a NUL character"),
        ("name", "send\x00email", "name cannot hold a NUL character"),
        ("status", "failed' OR 1=1", "no status is called"),
        ("before", "-1", "before must be a job id"),
    ],
)
async def test_garbage_in_a_bulk_actions_filter_is_refused_not_a_server_error(
    seeded: Seeded, acting: httpx2.AsyncClient, calls: Calls, field: str, value: str, message: str
) -> None:
    fields = form_of((await acting.get("/ops/jobs?queue=dash-mail&status=failed")).text)
    response = await acting.post("/ops/bulk-actions/retry", data={**fields, field: value})
    assert response.status_code == 400
    assert message in response.text
    assert calls == []  # refused before the hook is asked
    assert await seeded.jobs.list_bulks() == []


@pytest.mark.parametrize(
    "query", ["queue=dash%00mail", "queue=no+such+queue%21", "name=a%00b", "since=1h%00"]
)
async def test_garbage_in_the_lists_filter_is_a_400_page(
    acting: httpx2.AsyncClient, query: str
) -> None:
    response = await acting.get(f"/ops/jobs?{query}")
    assert response.status_code == 400
