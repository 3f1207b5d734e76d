"""`starlette-jobs dashboard`: the dashboard served by the command line, read-only unless a hook
is named, stopped by SIGTERM; a hook that cannot be found is a usage error (status 2)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest

from starlette_jobs import Jobs, job
from starlette_jobs.cli._main import main
from tests.cli.conftest import Module

ROOT = Path(__file__).resolve().parents[2]


@job(queue="cli-dashboard")
async def noted(text: str) -> None:
    pass


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def _enqueue(dsn: str) -> int:
    async with Jobs(dsn, queues={}):
        return await noted.enqueue(text="hello")


def test_the_dashboard_is_served_read_only_and_stops_on_sigterm(database_dsn: str) -> None:
    job_id = asyncio.run(_enqueue(database_dsn))
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "starlette_jobs", "dashboard", "--dsn", database_dsn,
         "--port", str(port)],
        cwd=ROOT, env=os.environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        first = server.stdout.readline()  # printed once the Jobs has started, before serving
        assert first == f"dashboard on http://127.0.0.1:{port}/ (read-only)\n", first
        with httpx2.Client(base_url=f"http://127.0.0.1:{port}") as client:
            deadline = time.monotonic() + 10
            while True:  # uvicorn binds its socket right after that line
                try:
                    page = client.get(f"/jobs/{job_id}")
                    break
                except httpx2.ConnectError:
                    assert time.monotonic() < deadline, "the dashboard never listened"
                    time.sleep(0.05)
            assert page.status_code == 200
            assert "hello" in page.text
            assert client.post(f"/jobs/{job_id}/cancel").status_code == 403  # read-only
    finally:
        server.send_signal(signal.SIGTERM)
        output, _ = server.communicate(timeout=30)
    assert server.returncode == 0, output


def test_a_hook_that_cannot_be_found_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dashboard", "--authorize", "no_such_module:allow", "--dsn",
                 "postgresql://app@127.0.0.1:1/app"]) == 2  # fmt: skip
    assert "--authorize no_such_module:allow" in capsys.readouterr().err


def test_a_trace_url_that_cannot_link_a_trace_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dashboard", "--trace-url", "https://tempo.example/trace/", "--dsn",
                 "postgresql://app@127.0.0.1:1/app"]) == 2  # fmt: skip
    assert "--trace-url: trace_url must hold {trace_id}" in capsys.readouterr().err


def test_a_hook_module_that_fails_as_it_imports_exits_2(
    module: Module, capsys: pytest.CaptureFixture[str]
) -> None:
    name = module("cli_broken_hook", "def allow(:\n")
    assert main(["dashboard", "--authorize", f"{name}:allow", "--dsn",
                 "postgresql://app@127.0.0.1:1/app"]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert err.startswith(f"starlette-jobs: error: --authorize {name}:allow: ")
    assert err.count("\n") == 1


def test_an_empty_secret_variable_exits_2_before_the_database(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `SECRET=${UNSET}` in a compose file: refused, not an empty key anyone can sign with.
    monkeypatch.setenv("STARLETTE_JOBS_DASHBOARD_SECRET", "")
    assert main(["dashboard", "--dsn", "postgresql://app@127.0.0.1:1/app"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("starlette-jobs: error: STARLETTE_JOBS_DASHBOARD_SECRET is set but empty")
    assert err.count("\n") == 1


def test_a_port_in_use_exits_2_with_one_line(database_dsn: str) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "starlette_jobs", "dashboard", "--dsn", database_dsn,
             "--port", str(port)],
            cwd=ROOT, env=os.environ, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 2, done
    assert done.stdout == ""  # no "dashboard on ..." for a dashboard that is not
    assert done.stderr.startswith(
        f"starlette-jobs: error: --port {port}: cannot listen on 127.0.0.1:{port}: "
    ), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
