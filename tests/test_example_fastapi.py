"""The FastAPI example (example_fastapi/) and the app that docs/fastapi.md builds, each served by
a real uvicorn server on a free port and driven by a real HTTP client: enqueue (202 with
`Location`), a 422 in FastAPI's shape for bad arguments, the status route, the typed job id,
and the server-sent events read from the wire until the job ends."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
import uvicorn

from example_app.app import jobs as starlette_example_jobs
from example_fastapi.app import app as example_app
from example_fastapi.app import jobs as fastapi_example_jobs
from example_fastapi.jobs import build_report
from starlette_jobs import Jobs, JobStatus
from starlette_jobs.postgres._embedded import DEFAULT_DATA_DIR
from tests.conftest import eventually
from tests.test_docs import DOCS, ROOT, python_blocks


def test_each_example_keeps_its_own_embedded_database() -> None:
    """README.md's and docs/fastapi.md's walkthroughs show job ids 1 and 2 on a fresh checkout:
    true only if one example's jobs do not take the ids of the other's."""
    data_dirs = {
        fastapi_example_jobs.config.embedded_data_dir,
        starlette_example_jobs.config.embedded_data_dir,
        DEFAULT_DATA_DIR,  # an app of the user's own, started in the same checkout
    }
    assert len(data_dirs) == 3


@dataclass
class Served:
    url: str
    jobs: Jobs


def guide_app() -> Any:
    """The app docs/fastapi.md builds, from its blocks run in order (as test_docs runs them)."""
    namespace: dict[str, Any] = {"__name__": "guide_fastapi"}
    for block in python_blocks(DOCS / "fastapi.md"):
        if block.not_run is None:
            exec(block.compiled(), namespace)
    return namespace["app"]


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """`app` served by uvicorn on a free port of 127.0.0.1, in this event loop."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, lifespan="on", log_level="warning", ws="none"))
    task = asyncio.create_task(server.serve(sockets=[sock]))

    async def up() -> bool:
        if task.done():
            raise AssertionError(f"uvicorn stopped while starting: {task.exception()!r}")
        return server.started

    try:
        await eventually(up, "uvicorn to start", timeout=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        async with asyncio.timeout(60):
            await task
        sock.close()


@pytest.fixture(params=["example_fastapi", "docs/fastapi.md"])
async def served(
    request: pytest.FixtureRequest, database_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Served]:
    # The apps' Jobs() take their database from DATABASE_URL when they start.
    monkeypatch.setenv("DATABASE_URL", database_dsn)
    app = example_app if request.param == "example_fastapi" else guide_app()
    async with serving(app) as url:
        jobs = app.state.jobs
        assert isinstance(jobs, Jobs)
        yield Served(url, jobs)


async def read_events(response: httpx2.Response) -> list[tuple[str, dict[str, Any]]]:
    """The server-sent events of a response, as (event, JSON data), until the server closes."""
    events: list[tuple[str, dict[str, Any]]] = []
    kind, data = "message", []
    async for line in response.aiter_lines():
        if line.startswith("event:"):
            kind = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data.append(line.removeprefix("data:").strip())
        elif not line and data:
            events.append((kind, json.loads("\n".join(data))))
            kind, data = "message", []
    return events


async def test_enqueue_status_and_the_event_stream_over_http(served: Served) -> None:
    async with httpx2.AsyncClient(base_url=served.url, timeout=30) as client:
        response = await client.post("/reports", json={"month": "2026-01", "pages": 2})
        assert response.status_code == 202
        location = response.headers["location"]
        job_id = response.json()["job_id"]
        assert location == f"{served.url}/jobs/{job_id}"
        assert int(response.headers["retry-after"]) >= 1

        status = await client.get(location)
        assert status.status_code == 200
        assert status.json()["status"] in ("pending", "running", "succeeded")
        assert "arguments" not in status.json()

        async with client.stream("GET", f"{location}/events") as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            events = await read_events(stream)
        assert events[0][0] == "status"
        kind, last = events[-1]
        assert (kind, last["status"], last["progress"]) == (
            "end",
            "succeeded",
            {"page": 2, "of": 2},
        )
        assert last["result"]["month"] == "2026-01"
        assert all(kind in ("status", "progress") for kind, _ in events[:-1])

        report = await client.get(f"/reports/{job_id}")
        assert (report.status_code, report.json()["pages"]) == (200, 2)
        assert (await client.get(location)).json()["status"] == "succeeded"


async def test_bad_arguments_and_bad_ids_over_http(served: Served) -> None:
    async with httpx2.AsyncClient(base_url=served.url, timeout=30) as client:
        bad = await client.post("/reports", json={"month": "2026-01", "pages": "many"})
        assert bad.status_code == 422
        assert bad.json() == {
            "detail": [
                {
                    "type": "int_parsing",
                    "loc": ["body", "pages"],
                    "msg": "Input should be a valid integer, unable to parse string as an integer",
                    "input": "many",
                }
            ]
        }
        for not_an_id in ["abc", "0", str(2**63)]:
            assert (await client.get(f"/reports/{not_an_id}")).status_code == 422
            assert (await client.get(f"/jobs/{not_an_id}")).status_code == 404
            assert (await client.get(f"/jobs/{not_an_id}/events")).status_code == 404
        assert (await client.get("/reports/123456")).status_code == 404
    assert (await served.jobs.count_by_status())[JobStatus.PENDING] == 0


async def test_a_client_that_leaves_the_stream_leaves_no_wait_behind(served: Served) -> None:
    async with httpx2.AsyncClient(base_url=served.url, timeout=30) as client:
        response = await client.post("/reports", json={"month": "2026-01", "pages": 10_000})
        job_id = response.json()["job_id"]
        async with client.stream("GET", f"/jobs/{job_id}/events") as stream:
            lines = stream.aiter_lines()
            assert await anext(lines) == "event: status"
        waiters = served.jobs._ready_waiters

        async def no_wait_left() -> bool:
            return waiters.watched == 0

        await eventually(no_wait_left, "the stream's wait to end")
        assert await served.jobs.cancel(job_id)


@pytest.mark.slow
async def test_a_server_that_stops_ends_the_streams_still_open(database_dsn: str) -> None:
    """A deploy (SIGTERM to a uvicorn process) does not wait for the streams of jobs that have
    not ended: they end whole (the clients' EventSource connects again, to the next server),
    and the server stops at once."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    url = f"http://127.0.0.1:{port}"
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "uvicorn", "example_fastapi.app:app", "--port", str(port),
        "--log-level", "warning",
        env={**os.environ, "DATABASE_URL": database_dsn},
        cwd=ROOT,
    )  # fmt: skip
    try:
        async with httpx2.AsyncClient(base_url=url, timeout=30) as client:

            async def up() -> bool:
                try:
                    return (await client.get("/jobs/1")).status_code == 404
                except httpx2.TransportError:
                    return False

            await eventually(up, "uvicorn to serve", timeout=60)
            # Due in an hour: pending, so that the app's Jobs stops at once too.
            async with Jobs(database_dsn, queues={}):
                job_id = await build_report.configure(delay=3600).enqueue(month="2026-01")
            async with client.stream("GET", f"/jobs/{job_id}/events") as stream:
                lines = stream.aiter_lines()
                assert await anext(lines) == "event: status"
                server.send_signal(signal.SIGTERM)
                async with asyncio.timeout(10):  # uvicorn would wait for it as long as it lasts
                    rest = [line async for line in lines]  # and it ends whole, not cut
            assert "event: end" not in rest
        async with asyncio.timeout(30):
            # uvicorn raises the signal again once it has shut down, for its supervisor to see.
            assert await server.wait() in (0, -signal.SIGTERM)
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()
