"""`TraceLinks`: the job page's link to its trace, built from `Dashboard(trace_url=...)`; and
the pages that show a job's trace and request: its page, the list filtered by either."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest
from opentelemetry.sdk.trace import TracerProvider

from starlette_jobs import Jobs, job
from starlette_jobs._correlation import correlation_scope
from starlette_jobs.dashboard import Dashboard
from starlette_jobs.dashboard._trace_links import TraceLinks
from tests.dashboard.pages import links, rows
from tests.dashboard.seeded import Seeded, app_of

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def test_the_trace_id_takes_its_place_in_the_template() -> None:
    links = TraceLinks("https://tempo.example/trace/{trace_id}?orgId=1")
    assert links.link(TRACE_ID) == f"https://tempo.example/trace/{TRACE_ID}?orgId=1"


def test_other_braces_of_the_template_stay_as_they_are() -> None:
    links = TraceLinks('https://ui.honeycomb.io/t?trace_id={trace_id}&q={"x":1}')
    assert links.link(TRACE_ID) == f'https://ui.honeycomb.io/t?trace_id={TRACE_ID}&q={{"x":1}}'


def test_no_link_without_a_template_or_a_trace() -> None:
    assert TraceLinks(None).link(TRACE_ID) is None
    assert TraceLinks("http://jaeger:16686/trace/{trace_id}").link(None) is None


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("https://tempo.example/trace/", "must hold {trace_id}"),
        ("javascript:alert('{trace_id}')", "must be an http or https URL"),
        ("/trace/{trace_id}", "must be an http or https URL"),
    ],
)
def test_a_template_that_cannot_link_a_trace_is_refused(template: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TraceLinks(template)


provider = TracerProvider()


@job(name="dash.traced", queue="dash-traced")
async def traced_job(n: int) -> None:
    pass


@pytest.fixture
async def traced_client(database_dsn: str) -> AsyncIterator[tuple[httpx2.AsyncClient, Jobs]]:
    async with Jobs(database_dsn, queues={}, tracer_provider=provider) as jobs:
        dashboard = Dashboard(jobs, trace_url="https://tempo.example/trace/{trace_id}")
        transport = httpx2.ASGITransport(app=app_of(dashboard))
        async with httpx2.AsyncClient(transport=transport, base_url="http://test") as client:
            yield client, jobs


async def test_the_job_page_links_its_trace_and_the_jobs_of_its_request(
    traced_client: tuple[httpx2.AsyncClient, Jobs],
) -> None:
    client, _ = traced_client
    with (
        correlation_scope("req-42"),
        provider.get_tracer("tests").start_as_current_span("POST /orders") as span,
    ):
        trace_id = format(span.get_span_context().trace_id, "032x")
        first, second = await traced_job.enqueue(1), await traced_job.enqueue(2)
    other = await traced_job.enqueue(3)

    page = links((await client.get(f"/ops/jobs/{first}")).text)
    assert page[trace_id] == f"https://tempo.example/trace/{trace_id}"
    listed = await client.get(page["req-42"])
    assert [int(row[0]) for row in rows(listed.text, "job")] == [int(second), int(first)]
    by_trace = await client.get(page["its jobs"])
    assert [int(row[0]) for row in rows(by_trace.text, "job")] == [int(second), int(first)]
    assert f'value="{trace_id}"' in by_trace.text  # the form keeps the filter
    unrelated = (await client.get(f"/ops/jobs/{other}")).text
    assert "req-42" not in unrelated


async def test_without_a_template_the_trace_id_is_shown_unlinked(
    traced_client: tuple[httpx2.AsyncClient, Jobs],
) -> None:
    _, jobs = traced_client
    with provider.get_tracer("tests").start_as_current_span("GET /") as span:
        trace_id = format(span.get_span_context().trace_id, "032x")
        job_id = await traced_job.enqueue(4)
    transport = httpx2.ASGITransport(app=app_of(Dashboard(jobs)))
    async with httpx2.AsyncClient(transport=transport, base_url="http://test") as client:
        html = (await client.get(f"/ops/jobs/{job_id}")).text
    assert f"<code>{trace_id}</code>" in html
    assert trace_id not in links(html)


async def test_a_trace_filter_that_is_no_trace_id_says_so(client: httpx2.AsyncClient) -> None:
    response = await client.get("/ops/jobs?trace_id=nope")
    assert response.status_code == 400
    assert "a trace id is 32 hex digits" in response.text


async def test_a_dashboard_with_a_template_that_cannot_link_is_refused(seeded: Seeded) -> None:
    with pytest.raises(ValueError, match="must hold"):
        Dashboard(seeded.jobs, trace_url="https://tempo.example/")
