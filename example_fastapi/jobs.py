"""The example's job: a report of a few pages, rendered slowly enough to show its progress."""

from __future__ import annotations

import asyncio

from starlette_jobs import Retry, current_job, job

PAGE_SECONDS = 0.5  # slow enough to watch the progress go by


@job(queue="reports", retry=Retry.exponential(max_attempts=3, base_delay=1.0))
async def build_report(month: str, pages: int = 5) -> dict[str, object]:
    """Renders `pages` pages, reporting each; the return value is the job's result."""
    me = current_job()
    for page in range(1, pages + 1):
        await asyncio.sleep(PAGE_SECONDS)  # render one page
        if me is not None:
            me.report_progress({"page": page, "of": pages})
    return {"month": month, "pages": pages, "url": f"/files/report-{month}.pdf"}
