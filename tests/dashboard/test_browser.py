"""The dashboard in a real browser: Debian's headless Chromium, driven by Playwright, against the
app served by uvicorn on 127.0.0.1. Each test takes a screenshot of the page it reads: into
docs/images/, which docs/dashboard.md shows, when STARLETTE_JOBS_SCREENSHOTS=docs is set (to
refresh them after a change of the pages), else into a temporary folder, so that a test run
leaves the checkout as it was.

Chromium comes from Debian's packages (Playwright's own browser downloads do not work here):
when it is missing, the fixture installs it as root, and fails, never skips, otherwise."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest
import uvicorn
from playwright.async_api import Page, async_playwright, expect

from starlette_jobs import JobStatus, Workflow
from starlette_jobs.dashboard import Dashboard
from tests.conftest import eventually
from tests.dashboard.seeded import (
    MOUNT,
    Seeded,
    allow_but_cancel,
    app_of,
    broken_report,
    send_email,
)

IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
CHROMIUM = "/usr/bin/chromium"
# Those that work on a machine with no network beyond loopback: without the background
# networking ones, Chromium keeps trying to reach Google's hosts.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's chromium, installed if it is missing and we may (as root)."""
    if shutil.which(CHROMIUM) is None:
        if os.geteuid() != 0:
            pytest.fail(f"the browser tests need {CHROMIUM}: `apt-get install chromium` as root")
        environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=environment)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=True, env=environment)
    return CHROMIUM


@pytest.fixture
async def served(seeded: Seeded) -> AsyncIterator[str]:
    """The dashboard under /ops of an app served by uvicorn on a free port; its address."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    # No reload while a test reads a page; every action allowed but cancel.
    app = app_of(Dashboard(seeded.jobs, refresh=None, authorize=allow_but_cancel([])))
    server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="warning", ws="none"))
    task = asyncio.create_task(server.serve(sockets=[sock]))

    async def up() -> bool:
        if task.done():
            raise AssertionError(f"uvicorn stopped while starting: {task.exception()!r}")
        return server.started

    try:
        await eventually(up, "uvicorn to start", timeout=30)
        yield f"http://127.0.0.1:{port}{MOUNT}"
    finally:
        server.should_exit = True
        async with asyncio.timeout(30):
            await task
        sock.close()


@pytest.fixture
async def page(chromium: str) -> AsyncIterator[Page]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=chromium, headless=True, args=FLAGS
        )
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 720})
            page.set_default_timeout(10_000)
            yield page
        finally:
            await browser.close()


@pytest.fixture(scope="session")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.environ.get("STARLETTE_JOBS_SCREENSHOTS") == "docs":
        IMAGES.mkdir(exist_ok=True)
        return IMAGES
    return tmp_path_factory.mktemp("screenshots")


Shoot = Callable[[Page, str], Awaitable[None]]


@pytest.fixture
def screenshot(images: Path) -> Shoot:
    """`await screenshot(page, name)`: the page, whole, as dashboard-<name>.png."""

    async def shoot(page: Page, name: str) -> None:
        await page.screenshot(path=images / f"dashboard-{name}.png", full_page=True)

    return shoot


async def test_the_overview_leads_to_the_failed_jobs_of_a_queue(
    served: str, page: Page, seeded: Seeded, screenshot: Shoot
) -> None:
    await page.goto(f"{served}/")
    mail = page.locator('tr.queue[data-queue="dash-mail"]')
    await expect(mail.locator("a.count.succeeded")).to_have_text("3")
    await expect(page.locator('tr.queue[data-queue="dash-reports"] td').nth(1)).to_have_text(
        "active"
    )
    # The seed's drain: 3 sent and a report that failed, in the last minutes' bars.
    await expect(mail.locator("td.finished-recently")).to_have_text("4")
    await expect(mail.locator("td.failed-recently")).to_have_text("1")
    await expect(mail.locator("svg.rate rect.failed")).to_have_count(1)
    await screenshot(page, "overview")

    await mail.locator("a.count.failed").click()
    await expect(page.locator("tr.job")).to_have_count(1)
    await expect(page.locator("tr.job td").first).to_have_text(str(seeded.failed))


async def test_the_list_filtered_by_its_form(
    served: str, page: Page, seeded: Seeded, screenshot: Shoot
) -> None:
    await page.goto(f"{served}/jobs")
    await expect(page.locator("tr.job")).to_have_count(6)
    await page.select_option('select[name="status"]', "pending")
    await page.fill('input[name="queue"]', "dash-mail")
    await page.click('button:has-text("Filter")')
    await expect(page).to_have_url(
        f"{served}/jobs?status=pending&queue=dash-mail&name=&trace_id=&correlation_id=&since="
    )
    await expect(page.locator("tr.job")).to_have_count(1)
    await expect(page.locator("tr.job td").first).to_have_text(str(seeded.delayed))
    # The page shows the filters it applied.
    await expect(page.locator('select[name="status"]')).to_have_value("pending")
    await page.select_option('select[name="status"]', "")
    await page.click('button:has-text("Filter")')
    await expect(page.locator("tr.job")).to_have_count(5)  # dash-mail's, of every status
    await page.fill('input[name="since"]', "1h")
    await page.click('button:has-text("Filter")')
    await expect(page.locator("tr.job")).to_have_count(4)  # finished in the last hour
    await page.fill('input[name="since"]', "")
    await page.click('button:has-text("Filter")')
    await expect(page.locator("tr.job")).to_have_count(5)
    await screenshot(page, "jobs")


async def test_a_failed_jobs_page_with_its_events(
    served: str, page: Page, seeded: Seeded, screenshot: Shoot
) -> None:
    await page.goto(f"{served}/jobs?status=failed")
    await page.click(f'tr.job a:text-is("{seeded.failed}")')
    await expect(page.locator("h1")).to_have_text(f"Job {seeded.failed}")
    await expect(page.locator("#status")).to_have_text("failed")
    await expect(page.locator("tr.event td:nth-child(2)")).to_have_text(
        ["enqueued", "claimed", "failed"]
    )
    await expect(page.locator("tr.error-attempt")).to_contain_text("no sales figures for 2026-10")
    await screenshot(page, "job")

    # The same page through the header's id field.
    await page.goto(f"{served}/workers")
    await page.fill('input[name="id"]', str(seeded.sent[0]))
    await page.click('button:has-text("Open")')
    await expect(page).to_have_url(f"{served}/jobs/{seeded.sent[0]}")
    await expect(page.locator("#result")).to_contain_text("user0@example.com")


async def test_the_workers_and_the_schedules(
    served: str, page: Page, seeded: Seeded, screenshot: Shoot
) -> None:
    await page.goto(f"{served}/workers")
    await expect(page.locator("tr.worker td").first).to_have_text(str(seeded.jobs.worker_id))
    await expect(page.locator("tr.stuck td").nth(2)).to_have_text("1")
    await screenshot(page, "workers")
    await page.click('nav a:text-is("Schedules")')
    await expect(page.locator("tr.schedule td").first).to_have_text("tests.dashboard.new_year")
    await screenshot(page, "schedules")


async def test_a_workflow_from_the_list_to_a_steps_job_and_back(
    served: str, page: Page, seeded: Seeded, screenshot: Shoot
) -> None:
    flow = Workflow("monthly-report")
    notify = flow.add("notify", send_email, to="finance@example.com")
    report = flow.add("report", broken_report, month="2026-11")
    flow.after(notify, report).add("archive", send_email, to="archive@example.com")
    enqueued = await flow.enqueue()
    await seeded.jobs.drain()

    await page.goto(f"{served}/")
    await page.click('nav a:text-is("Workflows")')
    row = page.locator(f'tr.workflow[data-id="{enqueued.id}"]')
    await expect(row.locator("td").nth(1)).to_have_text("monthly-report")
    await expect(row.locator("span.status")).to_have_text(
        ["1 succeeded", "1 failed", "1 cancelled"]
    )
    await screenshot(page, "workflows")

    await row.locator("a").click()
    await expect(page.locator("h1")).to_have_text(f"Workflow {enqueued.id}: monthly-report")
    steps = page.locator("tr.step")
    await expect(steps.locator("td:nth-child(1)")).to_have_text(["notify", "report", "archive"])
    await expect(steps.locator("td:nth-child(4)")).to_have_text(
        ["succeeded", "failed", "cancelled"]
    )
    await expect(steps.locator("td:nth-child(6)")).to_have_text(["", "", "notify, report"])
    await expect(steps.locator("td:nth-child(7)")).to_have_text(["archive", "archive", ""])
    await screenshot(page, "workflow")

    await page.locator("#step-report td:nth-child(2) a").click()
    await expect(page.locator("h1")).to_have_text(f"Job {enqueued.steps['report']}")
    await page.click(f'a:text-is("{enqueued.id}")')
    await expect(page).to_have_url(f"{served}/workflows/{enqueued.id}")


async def test_retrying_a_failed_job_after_pausing_its_queue(
    served: str, page: Page, seeded: Seeded, screenshot: Shoot
) -> None:
    # Paused, so that the retried job stays pending while the test looks at it.
    await page.goto(f"{served}/")
    mail = page.locator('tr.queue[data-queue="dash-mail"]')
    await mail.locator('button:text-is("pause")').click()
    await expect(mail.locator("span.badge")).to_have_text("paused")

    await page.goto(f"{served}/jobs/{seeded.failed}")
    await page.click('button:text-is("retry")')
    await expect(page.locator("#done")).to_have_text("retry: done")
    await expect(page.locator("#status")).to_have_text("pending")
    await expect(page.locator("tr.event td:nth-child(2)").last).to_have_text("retried")
    await screenshot(page, "retried")


async def test_an_action_the_hook_refuses(served: str, page: Page, seeded: Seeded) -> None:
    await page.goto(f"{served}/jobs/{seeded.delayed}")
    await page.click('button:text-is("cancel")')
    await expect(page.locator("p.error")).to_have_text("you may not cancel on queue 'dash-mail'")
    await page.goto(f"{served}/jobs/{seeded.delayed}")
    await expect(page.locator("#status")).to_have_text("pending")


BULK = 10_000


async def test_a_bulk_retry_of_ten_thousand_failed_jobs_in_batches_with_one_audit_record(
    served: str, page: Page, seeded: Seeded, database_dsn: str, screenshot: Shoot
) -> None:
    # Seeded in one statement: 10,000 failed `send_email` jobs on a queue no worker of the test
    # works (they stay pending once retried), and one failed job of another name.
    connection = await asyncpg.connect(database_dsn)
    try:
        await connection.execute(
            """
            INSERT INTO starlette_jobs (name, queue, payload, status, attempts, max_attempts,
                                        last_error, started_at, finished_at)
            SELECT CASE WHEN n <= $1 THEN 'tests.dashboard.send_email' ELSE 'tests.other' END,
                   'dash-bulk', jsonb_build_object('to', 'user' || n || '@example.com'),
                   'failed', 1, 1, 'ConnectionError: the mail server refused', now(), now()
              FROM generate_series(1, $1 + 1) AS n
            """,
            BULK,
        )
    finally:
        await connection.close()

    await page.goto(f"{served}/jobs")
    await page.select_option('select[name="status"]', "failed")
    await page.fill('input[name="queue"]', "dash-bulk")
    await page.fill('input[name="name"]', "tests.dashboard.send_email")
    await page.click('button:has-text("Filter")')

    # Near the end: the test holds the row of the last job to retry; the last batch takes the
    # others and skips it (it waits for no lock), and the action stays running until it can
    # take that one too.
    holder = await asyncpg.connect(database_dsn)
    try:
        last = await holder.fetchval(
            "SELECT max(id) FROM starlette_jobs"
            " WHERE queue = 'dash-bulk' AND name = 'tests.dashboard.send_email'"
        )
        held = holder.transaction()
        await held.start()
        await holder.execute("SELECT 1 FROM starlette_jobs WHERE id = $1 FOR UPDATE", last)
        try:
            await page.click('button:text-is("retry every matching job")')
            # The progress page, reloaded each second while it runs.
            await expect(page.locator("h1")).to_have_text(re.compile(r"Bulk retry \d+"))
            await expect(page.locator("#matched")).to_have_text(str(BULK))
            await expect(page.locator("#state")).to_have_text(
                f"running, {BULK - 1} of {BULK} so far", timeout=15_000
            )
            await expect(page.locator("#progress")).to_have_attribute("value", str(BULK - 1))
        finally:
            await held.rollback()
    finally:
        await holder.close()

    # Let go, the last job is taken, and the page says so at its next reload.
    await expect(page.locator("#state")).to_have_text(
        f"finished: {BULK} of {BULK} jobs retried", timeout=30_000
    )
    await expect(page.locator("#progress")).to_have_attribute("value", str(BULK))
    await expect(page.locator("#by")).to_have_text("ada@example.com")
    await screenshot(page, "bulk")

    counts = await seeded.jobs.count_by_status(queue="dash-bulk")
    assert (counts[JobStatus.PENDING], counts[JobStatus.FAILED]) == (BULK, 1)
    # One audit record, naming who asked; and the jobs' events name them too, written by
    # 20 statements of 500 (the last of them 499) and the one that took the held job (each
    # batch writes its events at its own transaction's time).
    [record] = await seeded.jobs.list_bulks()
    assert (record.by, record.matched, record.done, record.finished) == (
        "ada@example.com", BULK, BULK, True,
    )  # fmt: skip
    connection = await asyncpg.connect(database_dsn)
    try:
        counted = await connection.fetchrow(
            "SELECT count(DISTINCT at), count(*) FILTER (WHERE actor = 'ada@example.com')"
            "  FROM starlette_jobs_events WHERE kind = 'retried'"
        )
    finally:
        await connection.close()
    assert counted is not None
    assert tuple(counted) == (BULK // 500 + 1, BULK)

    await page.click('nav a:text-is("Bulk actions")')
    await expect(page.locator("tr.bulk td").nth(2)).to_have_text("ada@example.com")
    await expect(page.locator("tr.bulk td").last).to_have_text(f"{BULK} / {BULK}")
