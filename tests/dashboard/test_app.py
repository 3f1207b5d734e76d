"""`Dashboard`: each page, as an operator reads it through the app that mounts it under `/ops`,
on a real PostgreSQL with jobs in each state."""

from __future__ import annotations

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from starlette_jobs import Jobs, JobStatus
from starlette_jobs.dashboard import Dashboard, _app, _listing, _overview
from tests.dashboard.pages import links, rows
from tests.dashboard.seeded import Seeded, app_of, broken_report, build_report, send_email

NAME = send_email.name


def queue_row(html: str, queue: str) -> dict[str, str]:
    """The overview's row of `queue`, by column heading."""
    headings = ["queue", "state", *[status.value for status in JobStatus], "limit", "next due"]
    headings += ["finished lately", "failed lately", "per minute"]
    (row,) = [row for row in rows(html, "queue") if row[0] == queue]
    return dict(zip(headings, row, strict=True))


def listed_ids(html: str) -> list[int]:
    return [int(row[0]) for row in rows(html, "job")]


async def test_the_overview_counts_each_queues_jobs_by_status(
    client: httpx2.AsyncClient,
) -> None:
    response = await client.get("/ops/")
    assert response.status_code == 200
    mail = queue_row(response.text, "dash-mail")
    assert (mail["succeeded"], mail["failed"], mail["pending"]) == ("3", "1", "1")
    assert (mail["state"], mail["limit"]) == ("active", "0 / no limit")
    assert mail["next due"] == ""  # its pending job is due in an hour
    reports = queue_row(response.text, "dash-reports")  # a queue only its pending job names
    assert reports["pending"] == "1"
    assert reports["next due"].endswith("s")  # due now: waiting for a few seconds
    assert '<meta http-equiv="refresh" content="5">' in response.text


async def test_the_overview_shows_the_jobs_finished_and_failed_lately(
    seeded: Seeded, client: httpx2.AsyncClient
) -> None:
    # The seed's drain ran 3 sends and a report that failed, and wrote the worker's counts.
    html = (await client.get("/ops/")).text
    mail = queue_row(html, "dash-mail")
    assert (mail["finished lately"], mail["failed lately"]) == ("4", "1")
    assert queue_row(html, "dash-reports")["finished lately"] == "0"  # no worker works it
    # A bar per minute, the failed one in red, each minute told in its title.
    assert html.count('<svg class="rate"') == 2
    assert html.count(" UTC: ") == 2 * 15
    assert " finished, 1 failed, 0 retried</title>" in html
    assert '<rect class="failed"' in html
    await send_email.enqueue(to="one-more@example.com")
    await seeded.jobs.drain()
    assert queue_row((await client.get("/ops/")).text, "dash-mail")["finished lately"] == "5"


async def test_a_count_past_the_cap_shows_the_cap_and_a_plus(
    client: httpx2.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_overview, "COUNT_CAP", 2)
    html = (await client.get("/ops/")).text
    mail = queue_row(html, "dash-mail")
    assert (mail["succeeded"], mail["failed"], mail["pending"]) == ("2+", "1", "1")
    assert "finished ones up to 2 per status, shown as 2+ past it" in html


async def test_the_overview_shows_a_paused_queue_and_its_limit(
    seeded: Seeded, client: httpx2.AsyncClient
) -> None:
    await seeded.jobs.pause("dash-reports")
    reports = queue_row((await client.get("/ops/")).text, "dash-reports")
    assert reports["state"] == "paused"
    await seeded.jobs.resume("dash-reports")
    assert queue_row((await client.get("/ops/")).text, "dash-reports")["state"] == "active"


async def test_the_overview_shows_the_queues_it_is_given(seeded: Seeded) -> None:
    transport = httpx2.ASGITransport(app=app_of(Dashboard(seeded.jobs, queues=["dash-empty"])))
    async with httpx2.AsyncClient(transport=transport, base_url="http://test") as client:
        html = (await client.get("/ops/")).text
    assert [row[0] for row in rows(html, "queue")] == ["dash-empty"]
    assert queue_row(html, "dash-empty")["pending"] == "0"


async def test_the_overview_links_each_count_to_its_jobs(client: httpx2.AsyncClient) -> None:
    html = (await client.get("/ops/")).text
    assert 'href="/ops/jobs?queue=dash-mail&amp;status=failed"' in html


async def test_the_list_shows_the_most_recent_jobs_first(
    seeded: Seeded, client: httpx2.AsyncClient
) -> None:
    response = await client.get("/ops/jobs")
    assert response.status_code == 200
    expected = [seeded.report, seeded.delayed, seeded.failed, *reversed(seeded.sent)]
    assert listed_ids(response.text) == expected
    failed_row = rows(response.text, "job")[expected.index(seeded.failed)]
    assert failed_row[3] == "failed"
    assert failed_row[-1] == "RuntimeError: no sales figures for 2026-10"  # not the traceback


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("status=failed", "failed"),
        ("status=pending&queue=dash-mail", "delayed"),
        ("queue=dash-reports", "report"),
        (f"name={build_report.name}", "report"),
        # A form sends its empty fields too: an empty field filters nothing.
        ("status=failed&queue=&name=", "failed"),
    ],
)
async def test_the_list_filters(
    seeded: Seeded, client: httpx2.AsyncClient, query: str, expected: str
) -> None:
    response = await client.get(f"/ops/jobs?{query}")
    assert listed_ids(response.text) == [getattr(seeded, expected)]


async def test_the_list_keeps_its_filters_in_the_form(client: httpx2.AsyncClient) -> None:
    html = (await client.get("/ops/jobs?status=succeeded&queue=dash-mail")).text
    assert '<option value="succeeded" selected>' in html
    assert '<input name="queue" value="dash-mail">' in html


async def test_the_list_pages_by_id_with_the_filters_kept(seeded: Seeded) -> None:
    transport = httpx2.ASGITransport(app=app_of(Dashboard(seeded.jobs, page_size=2)))
    seen: list[int] = []
    async with httpx2.AsyncClient(transport=transport, base_url="http://test") as client:
        url: str | None = f"/ops/jobs?name={NAME}"
        while url is not None:
            html = (await client.get(url)).text
            seen += listed_ids(html)
            url = links(html).get("older")
            if url is not None:
                assert f"name={NAME}" in url
    assert seen == [seeded.delayed, *reversed(seeded.sent)]
    assert "newest" in links(html)  # a later page links back to the first


async def test_a_job_id_opens_its_page(seeded: Seeded, client: httpx2.AsyncClient) -> None:
    response = await client.get(f"/ops/jobs?id={seeded.failed}")
    assert response.status_code == 303
    assert response.headers["location"] == f"/ops/jobs/{seeded.failed}"


@pytest.mark.parametrize(
    ("query", "status", "message"),
    [
        ("id=99999999", 404, "no job 99999999"),
        ("status=lost", 400, "no status is called &#39;lost&#39;"),
        ("before=-3", 400, "before must be a job id"),
        ("id=abc", 400, "id must be a job id"),
    ],
)
async def test_what_names_no_job_is_answered_on_the_page(
    client: httpx2.AsyncClient, query: str, status: int, message: str
) -> None:
    response = await client.get(f"/ops/jobs?{query}")
    assert response.status_code == status
    assert message in response.text


async def test_a_failed_jobs_page_shows_its_arguments_errors_and_events(
    seeded: Seeded, client: httpx2.AsyncClient
) -> None:
    response = await client.get(f"/ops/jobs/{seeded.failed}")
    assert response.status_code == 200
    html = response.text
    assert "&#34;month&#34;: &#34;2026-10&#34;" in html
    ((attempt, _at, worker, error),) = rows(html, "error-attempt")
    assert attempt == "1"
    assert worker
    assert worker in rows(html, "event")[1]
    assert "RuntimeError: no sales figures for 2026-10" in error
    assert [row[1] for row in rows(html, "event")] == ["enqueued", "claimed", "failed"]
    assert "refresh" not in html  # a finished job changes no more (but by a retry)


async def test_a_succeeded_jobs_page_shows_its_result(
    seeded: Seeded, client: httpx2.AsyncClient
) -> None:
    html = (await client.get(f"/ops/jobs/{seeded.sent[0]}")).text
    assert "&#34;sent_to&#34;: &#34;user0@example.com&#34;" in html
    assert [row[1] for row in rows(html, "event")] == ["enqueued", "claimed", "succeeded"]


async def test_a_pending_jobs_page_reloads(seeded: Seeded, client: httpx2.AsyncClient) -> None:
    html = (await client.get(f"/ops/jobs/{seeded.delayed}")).text
    assert '<meta http-equiv="refresh" content="5">' in html


@pytest.mark.parametrize("job_id", ["99999999", "abc", "0"])
async def test_a_page_of_no_job_is_not_found(client: httpx2.AsyncClient, job_id: str) -> None:
    response = await client.get(f"/ops/jobs/{job_id}")
    assert response.status_code == 404
    assert f"no job {job_id}" in response.text


async def test_the_arguments_are_escaped(seeded: Seeded, client: httpx2.AsyncClient) -> None:
    job_id = await send_email.configure(delay=3600).enqueue(to="<script>alert(1)</script>")
    html = (await client.get(f"/ops/jobs/{job_id}")).text
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


async def test_the_workers_page_shows_the_live_worker_and_the_jobs_none_can_run(
    seeded: Seeded, client: httpx2.AsyncClient
) -> None:
    html = (await client.get("/ops/workers")).text
    ((worker_id, _host, _pid, queues, *_),) = rows(html, "worker")
    assert (worker_id, queues) == (seeded.jobs.worker_id, "dash-mail")
    ((queue, name, pending, _due),) = rows(html, "stuck")
    assert (queue, name, pending) == ("dash-reports", build_report.name, "1")


async def test_the_schedules_page_shows_each_schedule_and_its_next_tick(
    client: httpx2.AsyncClient,
) -> None:
    html = (await client.get("/ops/schedules")).text
    ((name, job, queue, cron, zone, _overlap, next_tick, last),) = rows(html, "schedule")
    assert (name, job, queue, cron, zone) == (
        "tests.dashboard.new_year", NAME, "dash-mail", "0 0 1 1 *", "UTC"
    )  # fmt: skip
    assert next_tick.endswith("-01-01 00:00:00 UTC")
    assert last == ""


async def test_the_stylesheet_is_served_from_the_package(client: httpx2.AsyncClient) -> None:
    html = (await client.get("/ops/")).text
    assert '<link rel="stylesheet" href="/ops/static/dashboard.css">' in html
    response = await client.get("/ops/static/dashboard.css")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/css")


async def test_a_database_that_does_not_answer_is_a_503_page(database_dsn: str) -> None:
    jobs = Jobs("postgresql://nobody@127.0.0.1:1/none", queues={}, require_database=False)
    async with jobs:
        transport = httpx2.ASGITransport(app=Starlette(routes=[Mount("/", app=Dashboard(jobs))]))
        async with httpx2.AsyncClient(transport=transport, base_url="http://test") as client:
            response = await client.get("/jobs")
    assert response.status_code == 503
    assert "Database unavailable" in response.text


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"page_size": 0}, "page_size must be an integer from 1 to 1000"),
        ({"page_size": 1001}, "page_size must be an integer from 1 to 1000"),
        ({"refresh": 0.5}, "refresh must be at least 1 second"),
        ({"refresh": float("nan")}, "refresh must be at least 1 second"),
        ({"refresh": True}, "refresh must be at least 1 second"),
        # An empty HMAC key: anyone could sign a CSRF cookie the dashboard accepts.
        ({"secret": ""}, "secret must not be empty"),
        ({"secret": b""}, "secret must not be empty"),
    ],
)
def test_settings_out_of_range_are_refused(options: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Dashboard(Jobs("memory://", queues={}), **options)  # type: ignore[arg-type]


async def test_a_filter_no_index_serves_looks_through_a_window_of_ids_a_page(
    seeded: Seeded, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two ids a page: the failed report (the 4th of 6 jobs) is two windows down.
    monkeypatch.setattr(_listing, "SCAN_WINDOW", 2)
    monkeypatch.setattr(_app, "SCAN_WINDOW", 2)
    transport = httpx2.ASGITransport(app=app_of(Dashboard(seeded.jobs)))
    seen: list[int] = []
    notes: list[str] = []
    async with httpx2.AsyncClient(transport=transport, base_url="http://test") as client:
        url: str | None = f"/ops/jobs?name={broken_report.name}"
        while url is not None:
            html = (await client.get(url)).text
            seen += listed_ids(html)
            notes += [line.strip() for line in html.splitlines() if "Looked through jobs" in line]
            url = links(html).get("older")
    assert seen == [seeded.failed]
    newest = seeded.report
    assert f"Looked through jobs {newest - 1} to {newest}" in notes[0]
    assert "at most 2 jobs a page" in notes[0]
    assert len(notes) == 2  # the third window reaches the first job: no note, no older page
