"""The testing kit users get: `starlette_jobs.testing`'s fixtures and helpers, on both stores."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from starlette_jobs import (
    Jobs,
    JobStatus,
    Retry,
    current_job,
    job,
)
from starlette_jobs.testing import _fixtures as fixtures
from starlette_jobs.testing import (
    assert_enqueued,
    assert_enqueued_now,
    eager,
    run_enqueued,
    run_enqueued_now,
    simulate_outage,
)
from starlette_jobs.testing._fixtures import configured_server
from starlette_jobs.web import job_status_router
from tests.conftest import eventually

done: list[str] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    done.clear()


@job(queue="first")
async def first_step(order: str) -> None:
    done.append(f"first {order}")
    await second_step.enqueue(order=order)


@job(queue="second")
async def second_step(order: str) -> None:
    done.append(f"second {order}")


@job(queue="first")
async def first_step_elsewhere(order: str) -> None:
    """Enqueues the second step into a queue that only this call names."""
    done.append(f"first {order}")
    await second_step.configure(queue="second-elsewhere").enqueue(order=order)


@job(queue="flaky", retry=Retry.fixed(max_attempts=3, delay=0.2))
async def flaky_step(order: str) -> int:
    """Fails its first two attempts."""
    running = current_job()
    assert running is not None
    if running.attempt < 3:
        raise RuntimeError(f"attempt {running.attempt}")
    done.append(f"flaky {order}")
    return running.attempt


@job(queue="flaky", retry=Retry.fixed(max_attempts=2, delay=3600))
async def retried_in_an_hour() -> None:
    raise RuntimeError("not now")


@pytest.fixture(params=["postgres", "memory"])
def dsn(request: pytest.FixtureRequest) -> str:
    fixture = "jobs_database" if request.param == "postgres" else "jobs_memory"
    value: str = request.getfixturevalue(fixture)
    return value


async def test_run_enqueued_runs_every_queue_and_what_the_jobs_enqueue(dsn: str) -> None:
    async with Jobs(dsn, queues={}) as jobs:  # a web process: no worker of its own
        job_id = await first_step.enqueue(order="7")
        assert done == []
        await run_enqueued(jobs)
        record = await jobs.get(job_id)
        counts = await jobs.count_by_status()
    assert done == ["first 7", "second 7"]
    assert record is not None
    assert record.status is JobStatus.SUCCEEDED
    assert counts[JobStatus.SUCCEEDED] == 2


@pytest.mark.parametrize(
    ("timeout", "retry_wait"), [(math.nan, 1.0), (1.0, math.nan), (-1.0, 1.0), (1.0, -0.5)]
)
async def test_a_drain_refuses_times_it_cannot_wait_for(
    jobs_memory: str, timeout: float, retry_wait: float
) -> None:
    # NaN compares false with everything: taken as it is, it would mean no deadline at all.
    async with Jobs(jobs_memory) as jobs:
        with pytest.raises(ValueError, match="must be a number of seconds >= 0"):
            await jobs.drain(timeout, include_scheduled=False, retry_wait=retry_wait)
        with pytest.raises(ValueError, match="must be a number of seconds >= 0"):
            await run_enqueued(jobs, timeout=timeout, retry_wait=retry_wait)


async def test_run_enqueued_waits_for_retries_that_come_due_soon(dsn: str) -> None:
    async with Jobs(dsn, queues={}) as jobs:
        job_id = await flaky_step.enqueue(order="8")
        await run_enqueued(jobs)
        record = await jobs.get(job_id)
    assert record is not None
    assert (record.status, record.attempts, record.result) == (JobStatus.SUCCEEDED, 3, 3)
    assert done == ["flaky 8"]


async def test_run_enqueued_says_what_it_leaves_pending(
    dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A delayed job is not waited for, nor a retry due after the bound: both are counted."""
    caplog.set_level("INFO", logger="starlette_jobs")
    async with Jobs(dsn, queues={}) as jobs:
        later = await first_step.configure(delay=3600).enqueue(order="9")
        retried = await retried_in_an_hour.enqueue()
        await run_enqueued(jobs, retry_wait=5)
        records = [await jobs.get(later), await jobs.get(retried)]
    assert [(r.status, r.attempts) for r in records if r is not None] == [
        (JobStatus.PENDING, 0),
        (JobStatus.PENDING, 1),
    ]
    assert (
        "2 job(s) left pending: 1 scheduled for later, 1 retry due in more than 5 s" in caplog.text
    )


async def test_run_enqueued_and_eager_run_a_job_enqueued_into_a_queue_only_its_call_names(
    dsn: str,
) -> None:
    """A job that enqueues another with `configure(queue=...)`, into a queue no declaration
    names: its job was left pending, and neither counted nor logged as left."""
    async with Jobs(dsn, queues={}) as jobs:
        await first_step_elsewhere.enqueue(order="11")
        await run_enqueued(jobs)
        assert done == ["first 11", "second 11"]
        with eager(jobs):
            await first_step_elsewhere.enqueue(order="12")
            assert done[2:] == ["first 12", "second 12"]
        counts = await jobs.count_by_status()
    assert (counts[JobStatus.SUCCEEDED], sum(counts.values())) == (4, 4)


async def test_assert_enqueued_finds_the_job_or_says_what_was_enqueued(dsn: str) -> None:
    async with Jobs(dsn, queues={}) as jobs:
        job_id = await second_step.enqueue(order="7")
        record = await assert_enqueued(jobs, second_step, order="7")
        assert record.id == job_id
        with pytest.raises(AssertionError, match=r"enqueued:\n  \d+: \{'order': '7'\}"):
            await assert_enqueued(jobs, second_step, order="8")


@job(name="tests.testing.flagged", queue="testing")
async def flagged(value: bool | int) -> None:
    pass


async def test_assert_enqueued_tells_true_from_1_as_the_store_does(dsn: str) -> None:
    """`True == 1` in Python; in JSON, and to the store (a key reused with one for the other is
    another job's), they differ. It took a job stored with 1 for one enqueued with True."""
    async with Jobs(dsn, queues={}) as jobs:
        await flagged.enqueue(value=1)
        with pytest.raises(AssertionError, match=r"no tests\.testing\.flagged job was enqueued"):
            await assert_enqueued(jobs, flagged, value=True)
        with pytest.raises(AssertionError, match=r"no tests\.testing\.flagged job was enqueued"):
            await assert_enqueued(jobs, "tests.testing.flagged", value=True)
        assert (await assert_enqueued(jobs, flagged, value=1)).arguments == {"value": 1}


async def test_in_eager_mode_a_job_has_run_when_enqueue_returns(dsn: str) -> None:
    async with Jobs(dsn, queues={}) as jobs:
        with eager(jobs):
            await first_step.enqueue(order="9")
            assert done == ["first 9", "second 9"]  # the job it enqueued too
        await first_step.enqueue(order="10")  # eager no more
        assert done == ["first 9", "second 9"]


def test_memory_urls_are_a_tests_own(jobs_memory: str) -> None:
    assert jobs_memory.startswith("memory://test-")


async def signup(request: Request) -> JSONResponse:
    job_id = await first_step.enqueue(order=(await request.json())["order"])
    return JSONResponse({"job_id": job_id}, status_code=202)


def test_the_sync_helpers_work_through_testclient(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", dsn)
    app = Starlette(
        routes=[Route("/orders", signup, methods=["POST"])], lifespan=Jobs(queues={}).lifespan
    )
    with TestClient(app) as client:
        job_id = client.post("/orders", json={"order": "11"}).json()["job_id"]
        assert assert_enqueued_now(client, first_step, order="11").id == job_id
        run_enqueued_now(client)
    assert done == ["first 11", "second 11"]


def test_an_outage_simulated_on_an_app_answers_503_until_it_ends(jobs_memory: str) -> None:
    """What a user's test of "the database is down" sees through its app: the status route's
    503 with Retry-After, then the job again; the outage is the app's Jobs' store's."""
    app = Starlette(
        routes=[Route("/orders", signup, methods=["POST"]), Mount("/jobs", job_status_router())],
        lifespan=Jobs(jobs_memory, queues={}).lifespan,
    )
    with TestClient(app) as client:
        job_id = client.post("/orders", json={"order": "12"}).json()["job_id"]
        with simulate_outage(app) as outage:
            response = client.get(f"/jobs/{job_id}")
            assert (response.status_code, response.headers["retry-after"]) == (503, "1")
        assert outage.failed == ["get_job"]
        assert client.get(f"/jobs/{job_id}").json()["status"] == "pending"


async def test_an_outage_is_simulated_on_the_memory_store_only(database_dsn: str) -> None:
    async with Jobs(database_dsn, queues={}) as jobs:
        with pytest.raises(TypeError, match=r"in-memory store \(memory://\); this one is on Postg"):
            simulate_outage(jobs)
        assert await jobs.count_by_status()  # nothing changed
    with pytest.raises(TypeError, match="neither a Jobs nor an app"):
        simulate_outage(Starlette())


async def test_an_outage_of_some_calls_ends_after_them_and_the_worker_rides_it_out(
    jobs_memory: str,
) -> None:
    async with Jobs(jobs_memory, queues={"first": 1, "second": 1}, poll_interval=0.02) as jobs:
        job_id = await first_step.enqueue(order="13")
        outage = simulate_outage(jobs, calls=5)  # the worker's own calls are the ones to fail

        async def over() -> bool:
            return not outage.active

        await eventually(over, "the worker's calls to use the outage up")
        record = await jobs.wait(job_id, timeout=10)
        await jobs.drain()  # the job it enqueued
    assert record.status is JobStatus.SUCCEEDED
    assert done == ["first 13", "second 13"]
    assert len(outage.failed) == 5
    assert "claim_batch" in outage.failed


def test_the_sync_helpers_need_the_lifespan_running() -> None:
    client = TestClient(Starlette())
    with pytest.raises(TypeError, match="with TestClient"):
        run_enqueued_now(client)


async def test_a_database_can_be_taken_from_inside_an_async_test(
    request: pytest.FixtureRequest,
) -> None:
    """`request.getfixturevalue("jobs_database")` runs the fixture inside the test's running
    event loop: it creates the database all the same."""
    dsn: str = request.getfixturevalue("jobs_database")
    async with Jobs(dsn, queues={}) as jobs:
        job_id = await first_step.enqueue(order="9")
        await run_enqueued(jobs)
        record = await jobs.get(job_id)
    assert record is not None
    assert record.status is JobStatus.SUCCEEDED


ROOT = Path(__file__).resolve().parents[2]


def test_the_testing_pages_tests_pass_as_written_in_a_project_of_their_own(
    tmp_path: Path, jobs_server: str
) -> None:
    """docs/testing.md as a user copies it: its `conftest.py`, its `pyproject.toml` setting and
    its app and tests in a test module, run by pytest in a process of its own, with nothing of
    this project's configuration."""
    page = (ROOT / "docs" / "testing.md").read_text("utf-8")
    page = page.partition("## How this page's tests run")[0]  # what the docs test adds
    blocks = re.findall(r"^```(python|toml)\n(.*?)^```$", page, re.MULTILINE | re.DOTALL)
    [conftest] = [code for language, code in blocks if "pytest_plugins" in code]
    [settings] = [code for language, code in blocks if language == "toml"]
    tests = [code for language, code in blocks if language == "python" and code != conftest]
    (tmp_path / "conftest.py").write_text(conftest)
    (tmp_path / "pyproject.toml").write_text(settings)
    (tmp_path / "test_signup.py").write_text("\n\n".join(tests))
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    # This checkout's code, and its test server (the plugin makes its own databases there).
    env |= {"PYTHONPATH": str(ROOT), "DATABASE_URL": jobs_server}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_signup.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "7 passed" in done.stdout


@pytest.mark.parametrize(
    ("configured", "server"),
    [
        (None, None),
        ("", None),
        ("memory://app-tests", None),  # an app's own tests may run on it: no server there
        ("postgresql://ci@127.0.0.1:5432/ci", "postgresql://ci@127.0.0.1:5432/ci"),
    ],
)
def test_the_sessions_server_is_database_urls_unless_that_names_no_server(
    monkeypatch: pytest.MonkeyPatch, configured: str | None, server: str | None
) -> None:
    if configured is None:
        monkeypatch.delenv("DATABASE_URL", raising=False)
    else:
        monkeypatch.setenv("DATABASE_URL", configured)
    assert configured_server() == server


def test_the_embedded_test_servers_data_lives_in_memory_only_where_there_is_room(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Where the session's embedded server keeps its data: the memory-backed directory when it
    has the room asked for, else the temporary directory (None)."""
    monkeypatch.setattr(fixtures, "MEMORY_BACKED_DIR", tmp_path)
    free = shutil.disk_usage(tmp_path).free
    monkeypatch.setattr(fixtures, "MEMORY_NEEDED", free // 2)
    assert fixtures._in_memory() == str(tmp_path)
    monkeypatch.setattr(fixtures, "MEMORY_NEEDED", free * 2)
    assert fixtures._in_memory() is None
    monkeypatch.setattr(fixtures, "MEMORY_NEEDED", 0)
    monkeypatch.setattr(fixtures, "MEMORY_BACKED_DIR", tmp_path / "missing")
    assert fixtures._in_memory() is None
