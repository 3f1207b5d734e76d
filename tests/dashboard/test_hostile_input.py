"""The dashboard as an attacker and a careless operator meet it: garbage in every path and
query parameter is a 4xx page, never a 500; a read-only dashboard refuses every POST and shows
no form; mounted under a prefix behind a proxy's root_path, every link and form goes there."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

import asyncpg
import httpx2
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from starlette_jobs import JobStatus, Retry, job
from starlette_jobs._correlation import correlation_scope
from starlette_jobs.dashboard import Dashboard
from tests.dashboard.pages import links
from tests.dashboard.seeded import Seeded, app_of, send_email

HOSTILE = '"><img src=x onerror=alert(1)><script>alert(2)</script>'


@job(queue="dash-mail", retry=Retry.none())
async def hostile_failure(text: str) -> None:
    raise RuntimeError(text)


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
    ),
    *(f"/ops/workflows?before={text}" for text in ("%00", "-5", HUGE)),
    *(f"/ops/workflows/{text}" for text in ("%00", "-1", HUGE, "%D9%A3")),
    *(f"/ops/bulk/{text}" for text in ("%00", "-1", HUGE, "%D9%A3")),
    "/ops/static/%2e%2e/_app.py",
    # A queue no job can have (not UTF-8, past the length a queue may have): the filter's 400.
    "/ops/jobs?queue=%ff%fe",
    "/ops/jobs?queue=" + "x" * 4000,
    "/ops/nothing",
]


@pytest.mark.parametrize("path", GARBAGE_GETS)
async def test_garbage_in_a_page_is_answered_with_a_4xx_page(
    read_only: httpx2.AsyncClient, path: str
) -> None:
    response = await read_only.get(path)
    assert 400 <= response.status_code < 500, (response.status_code, response.text[-300:])
    assert "Traceback" not in response.text


@pytest.mark.parametrize("query", ["name=%3Cscript%3E", "name=%ff%fe", "name=" + "x" * 4000])
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


async def test_stored_html_is_shown_as_text_everywhere(seeded: Seeded) -> None:
    """Arguments, errors, a correlation id and the hook's name hold HTML: the pages show it as
    text, and the links carry it URL-encoded, never as markup."""
    with correlation_scope(HOSTILE):
        failed = await hostile_failure.enqueue(text=HOSTILE)
    await seeded.jobs.drain()
    dashboard = Dashboard(seeded.jobs, authorize=lambda *_: HOSTILE)
    async with client_of(app_of(dashboard)) as client:
        token = tokens_of((await client.get(f"/ops/jobs/{failed}")).text)[0]
        await client.post(f"/ops/jobs/{failed}/cancel", data={"csrf_token": token})
        await client.post(f"/ops/jobs/{failed}/retry", data={"csrf_token": token})
        pages = [
            (await client.get(path)).text
            for path in (f"/ops/jobs/{failed}", "/ops/jobs", "/ops/jobs?name=" + HOSTILE)
        ]
    for html in pages:
        assert "<img" not in html
        assert "<script>" not in html
    job_page = pages[0]
    assert job_page.count("&lt;script&gt;alert(2)&lt;/script&gt;") >= 3  # args, error, by
    correlation = links(job_page)[HOSTILE]
    assert correlation.startswith("/ops/jobs?correlation_id=%22%3E%3Cimg")


async def test_a_read_only_dashboard_refuses_every_post_and_shows_no_form(
    seeded: Seeded, read_only: httpx2.AsyncClient
) -> None:
    bulk = await seeded.jobs.begin_bulk("retry", queue="dash-mail")
    for path in ("/ops/", "/ops/jobs?queue=dash-mail", f"/ops/jobs/{seeded.failed}",
                 f"/ops/jobs/{seeded.delayed}", f"/ops/bulk/{bulk.id}"):  # fmt: skip
        html = (await read_only.get(path)).text
        assert 'method="post"' not in html, path
        assert "csrf_token" not in html, path
    # Even with a cookie and a field that match (signed by another dashboard's secret, or
    # none): no hook, no action.
    forged = {"csrf_token": "x"}
    read_only.cookies.set("starlette_jobs_csrf", "x.y")
    for path, form in [
        (f"/ops/jobs/{seeded.failed}/retry", forged),
        (f"/ops/jobs/{seeded.delayed}/cancel", forged),
        ("/ops/queues/dash-mail/pause", forged),
        ("/ops/bulk-actions/retry", {**forged, "queue": "dash-mail"}),
        ("/ops/bulk-actions/cancel", {**forged, "queue": "dash-mail"}),
        (f"/ops/bulk/{bulk.id}/run", forged),
    ]:
        response = await read_only.post(path, data=form)
        assert response.status_code == 403, path
        assert "read-only" in response.text
    assert (await seeded.jobs.get(seeded.failed)).status is JobStatus.FAILED  # type: ignore[union-attr]
    assert (await seeded.jobs.get(seeded.delayed)).status is JobStatus.PENDING  # type: ignore[union-attr]
    assert not (await seeded.jobs.queue_controls("dash-mail")).paused
    assert not (await seeded.jobs.get_bulk(bulk.id)).finished  # type: ignore[union-attr]
    assert len(await seeded.jobs.list_bulks(50)) == 1


async def test_behind_a_proxy_under_a_prefix_every_link_and_form_goes_there(
    seeded: Seeded,
) -> None:
    """`Mount("/admin/jobs", ...)` in an app served under the proxy's root_path `/proxy`."""
    app = Starlette(
        routes=[Mount("/admin/jobs", app=Dashboard(seeded.jobs, authorize=lambda *_: "ada"))]
    )
    prefix = "/proxy/admin/jobs"
    pages = ["/", "/jobs", "/jobs?queue=dash-mail", f"/jobs/{seeded.failed}", "/workers",
             f"/jobs/{seeded.delayed}", "/schedules", "/workflows", "/bulk"]  # fmt: skip
    async with client_of(app, root_path="/proxy") as client:
        first = await client.get(prefix + "/")
        assert "Path=/proxy/admin/jobs;" in first.headers["set-cookie"]
        seen: list[str] = []
        for path in pages:
            response = await client.get(prefix + path)
            assert response.status_code == 200, path
            seen += re.findall(r'(?:href|action|formaction)="([^"#][^"]*)"', response.text)
        assert len(seen) > 50
        assert [url for url in seen if not url.startswith(prefix + "/")] == []
        token = tokens_of((await client.get(f"{prefix}/jobs/{seeded.failed}")).text)[0]
        done = await client.post(f"{prefix}/jobs/{seeded.failed}/retry", data={"csrf_token": token})
        assert done.status_code == 303
        assert done.headers["location"].startswith(f"{prefix}/jobs/{seeded.failed}?")
        assert "retry: done" in (await client.get(done.headers["location"])).text
        jump = await client.get(f"{prefix}/jobs?id={seeded.sent[0]}")
        assert jump.headers["location"] == f"{prefix}/jobs/{seeded.sent[0]}"


@pytest.mark.parametrize(
    ("fetched_from", "status"),
    [("cross-site", 403), ("same-site", 403), ("same-origin", 303), ("none", 303), (None, 303)],
)
async def test_a_form_posted_from_another_site_is_refused_even_with_a_matching_token(
    seeded: Seeded, acting: httpx2.AsyncClient, fetched_from: str | None, status: int
) -> None:
    """A sibling subdomain can plant a cookie and field of its own that match (double-submit's
    weak spot); the browser's Sec-Fetch-Site tells its form apart from the dashboard's own."""
    await seeded.jobs.pause("dash-mail")  # a retried job stays pending while the test looks
    token = tokens_of((await acting.get(f"/ops/jobs/{seeded.failed}")).text)[0]
    headers = {} if fetched_from is None else {"sec-fetch-site": fetched_from}
    response = await acting.post(
        f"/ops/jobs/{seeded.failed}/retry", data={"csrf_token": token}, headers=headers
    )
    assert response.status_code == status
    record = await seeded.jobs.get(seeded.failed)
    assert record is not None
    assert record.status is (JobStatus.FAILED if status == 403 else JobStatus.PENDING)


async def test_a_hooks_name_postgresql_cannot_store_is_kept_escaped(seeded: Seeded) -> None:
    """The hook's name is the app's text (a header, a token's claim): a NUL in it must not
    turn the action into a 500 after the checks passed."""
    await seeded.jobs.pause("dash-mail")
    dashboard = Dashboard(seeded.jobs, authorize=lambda *_: "ada\x00\ud800")
    async with client_of(app_of(dashboard)) as client:
        token = tokens_of((await client.get(f"/ops/jobs/{seeded.failed}")).text)[0]
        done = await client.post(f"/ops/jobs/{seeded.failed}/retry", data={"csrf_token": token})
        assert done.status_code == 303
        bulk = await client.post(
            "/ops/bulk-actions/cancel", data={"csrf_token": token, "queue": "dash-mail"}
        )
        assert bulk.status_code == 303
    events = await seeded.jobs.events(seeded.failed)
    assert events[-1].by == "ada\\x00\\ud800"
    (record,) = await seeded.jobs.list_bulks(50)
    assert record.by == "ada\\x00\\ud800"


@pytest.mark.parametrize(
    ("queues", "message"),
    [
        ("dash-mail", "queues must be queue names, not one string"),
        (["dash-mail", "a/b"], "invalid queue name 'a/b'"),
    ],
)
async def test_queues_no_overview_can_show_are_refused_when_built(
    seeded: Seeded, queues: list[str] | str, message: str
) -> None:
    """Not a 500 on every load of the overview: one string is each of its letters, and a name
    no queue can have fails the overview's reads."""
    with pytest.raises(ValueError, match=message):
        Dashboard(seeded.jobs, queues=queues)


async def test_a_stored_trace_context_that_is_no_trace_links_nothing(
    seeded: Seeded, database_dsn: str
) -> None:
    """A row written by other means, its traceparent's trace id markup: no trace link is built
    from it (trace_url's template only ever gets 32 hex digits), and it shows as nothing."""
    job_id = await send_email.configure(delay=3600).enqueue(to="ops@example.com")
    carrier = {"traceparent": f"00-{HOSTILE}-00f067aa0ba902b7-01", "x-request-id": HOSTILE}
    connection = await asyncpg.connect(database_dsn)
    try:
        await connection.execute(
            "UPDATE starlette_jobs SET trace_context = $1::jsonb WHERE id = $2",
            json.dumps(carrier), job_id,
        )  # fmt: skip
    finally:
        await connection.close()
    dashboard = Dashboard(seeded.jobs, trace_url="https://tempo.example/trace/{trace_id}")
    async with client_of(app_of(dashboard)) as client:
        html = (await client.get(f"/ops/jobs/{job_id}")).text
    assert 'id="correlation"' in html  # the carrier was read: its correlation id is shown
    assert 'id="trace"' not in html
    assert "tempo.example" not in html
    assert "<script>" not in html
    assert "<img" not in html
