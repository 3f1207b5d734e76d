"""`worker --burst`'s progress line (`cli/_progress.py`): what it reads on a terminal, and that
it writes nothing anywhere else. The worker process on a pseudo-terminal, and on a pipe, is in
processes/test_burst_progress.py."""

from __future__ import annotations

import io

import pytest

from starlette_jobs import Jobs, JobStatus, Retry, job
from starlette_jobs.cli._progress import BAR_WIDTH, Progress, burst_progress

S, F, C, P, R = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED,
                 JobStatus.PENDING, JobStatus.RUNNING)  # fmt: skip


@job(queue="cli-progress", retry=Retry.none())
async def maybe(fail: bool) -> None:
    if fail:
        raise RuntimeError("asked to fail")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_jobs_to_do_are_those_pending_or_running_at_the_start() -> None:
    start = {P: 8, R: 2, S: 100, F: 5}
    progress = Progress.between(start, {P: 3, R: 1, S: 104, F: 7, C: 0})
    assert (progress.total, progress.done) == (10, 6)
    half = "#" * (BAR_WIDTH * 6 // 10) + "-" * (BAR_WIDTH - BAR_WIDTH * 6 // 10)
    assert progress.line() == f"[{half}] 6/10 jobs: 4 succeeded, 2 failed, 0 cancelled"


def test_nothing_to_do_is_a_full_bar_and_pruned_jobs_never_count_below_zero() -> None:
    progress = Progress.between({S: 50}, {S: 10})  # retention pruned 40 meanwhile
    assert progress.line() == f"[{'#' * BAR_WIDTH}] 0/0 jobs: 0 succeeded, 0 failed, 0 cancelled"


def test_jobs_enqueued_during_the_burst_grow_the_total_to_what_is_done() -> None:
    progress = Progress.between({P: 2}, {S: 5})
    assert progress.line().startswith(f"[{'#' * BAR_WIDTH}] 5/5 jobs")


@pytest.fixture
async def worker(database_dsn: str) -> Jobs:
    """An unstarted worker of `cli-progress`, whose queue holds 3 jobs, one that fails."""
    async with Jobs(database_dsn, queues={}):
        for fail in (False, False, True):
            await maybe.enqueue(fail=fail)
    return Jobs(database_dsn, queues={"cli-progress": 2})


async def test_on_a_terminal_the_line_ends_with_every_job_done(worker: Jobs) -> None:
    out = Terminal()
    async with burst_progress(worker, out), worker:
        await worker.drain()
    *_, last = out.getvalue().split("\r")
    assert last == (f"[{'#' * BAR_WIDTH}] 3/3 jobs: 2 succeeded, 1 failed, 0 cancelled\x1b[K\n")
    assert out.getvalue().startswith(f"\r[{'-' * BAR_WIDTH}] 0/3 jobs")


async def test_anywhere_else_nothing_is_written(worker: Jobs) -> None:
    out = io.StringIO()
    async with burst_progress(worker, out), worker:
        await worker.drain()
    assert out.getvalue() == ""
