"""The workflow pages (`/workflows`, `/workflows/<id>`) as an operator reads them through the
app that mounts the dashboard, and what they compute: the id checked, each step's dependents,
the counts in the statuses' order."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx2
import pytest

from starlette_jobs import EnqueuedWorkflow, JobStatus, Workflow, WorkflowSummary
from starlette_jobs.dashboard import Dashboard
from starlette_jobs.dashboard._listing import FilterError
from starlette_jobs.dashboard._workflow_pages import in_order, workflow_id
from tests.dashboard.pages import links, rows
from tests.dashboard.seeded import Seeded, app_of, broken_report, send_email


async def monthly_report(seeded: Seeded) -> EnqueuedWorkflow:
    """notify and report (which fails), then archive, cancelled since report failed."""
    flow = Workflow("monthly-report")
    notify = flow.add("notify", send_email, to="finance@example.com")
    report = flow.add("report", broken_report, month="2026-11")
    flow.after(notify, report).add("archive", send_email, to="archive@example.com")
    enqueued = await flow.enqueue()
    await seeded.jobs.drain()
    return enqueued


async def test_the_list_shows_each_workflow_with_its_steps_by_status(
    seeded: Seeded, client: httpx2.AsyncClient
) -> None:
    enqueued = await monthly_report(seeded)
    html = (await client.get("/ops/workflows")).text
    [row] = rows(html, "workflow")
    assert row[:2] == [str(enqueued.id), "monthly-report"]
    assert row[3:] == ["3", "1 succeeded 1 failed 1 cancelled"]
    assert links(html)[str(enqueued.id)] == f"/ops/workflows/{enqueued.id}"


async def test_a_workflows_page_shows_its_steps_both_ways_along_the_graph(
    seeded: Seeded, client: httpx2.AsyncClient
) -> None:
    enqueued = await monthly_report(seeded)
    html = (await client.get(f"/ops/workflows/{enqueued.id}")).text
    steps = {row[0]: row for row in rows(html, "step")}
    assert list(steps) == ["notify", "report", "archive"]
    assert steps["report"][3] == "failed"
    assert "no sales figures for 2026-11" in steps["report"][7]
    assert (steps["archive"][3], steps["archive"][5]) == ("cancelled", "notify, report")
    assert steps["notify"][6] == "archive"
    assert links(html)[str(enqueued.steps["archive"])] == (f"/ops/jobs/{enqueued.steps['archive']}")
    # Every step finished: nothing left to reload for.
    assert "http-equiv" not in html

    job_page = (await client.get(f"/ops/jobs/{enqueued.steps['report']}")).text
    assert links(job_page)[str(enqueued.id)] == f"/ops/workflows/{enqueued.id}"


async def test_the_list_is_paged_by_the_last_workflow_shown(seeded: Seeded) -> None:
    ids = []
    for n in range(3):
        flow = Workflow(f"flow-{n}")
        flow.add("only", send_email, to=f"user{n}@example.com")
        ids.append((await flow.enqueue()).id)
    transport = httpx2.ASGITransport(app=app_of(Dashboard(seeded.jobs, page_size=2)))
    async with httpx2.AsyncClient(transport=transport, base_url="http://test") as client:
        first = (await client.get("/ops/workflows")).text
        assert [int(row[0]) for row in rows(first, "workflow")] == [ids[2], ids[1]]
        second = (await client.get(links(first)["older"])).text
    assert [int(row[0]) for row in rows(second, "workflow")] == [ids[0]]
    assert "older" not in links(second)
    assert links(second)["newest"] == "/ops/workflows"


@pytest.mark.parametrize("path", ["/ops/workflows/999999", "/ops/workflows/x", "/ops/workflows/0"])
async def test_a_workflow_that_does_not_exist_is_a_404(
    client: httpx2.AsyncClient, path: str
) -> None:
    response = await client.get(path)
    assert response.status_code == 404
    assert "no workflow" in response.text


async def test_a_page_after_what_is_no_workflow_id_is_a_400(client: httpx2.AsyncClient) -> None:
    response = await client.get("/ops/workflows?before=-3")
    assert response.status_code == 400
    assert "before must be a workflow id" in response.text


def test_a_workflow_id_is_digits_within_64_bits() -> None:
    assert workflow_id(" 42 ", "before") == 42
    assert workflow_id(None, "before") is None
    for text in ("0", "-1", "4.2", str(2**63), "١٢"):
        with pytest.raises(FilterError, match="before must be a workflow id"):
            workflow_id(text, "before")


def test_counts_read_in_the_statuses_order() -> None:
    summary = WorkflowSummary(
        id=1, name="n", created_at=datetime.now(UTC),
        steps={JobStatus.CANCELLED: 1, JobStatus.PENDING: 2},
    )  # fmt: skip
    assert in_order(summary) == [(JobStatus.PENDING, 2), (JobStatus.CANCELLED, 1)]
    assert (summary.step_count, summary.finished) == (3, False)
