"""docs/logging.md, under a real uvicorn: the library's INFO lines reach the console only with a
logging configuration that names its logger, and the page's configuration does it; without one,
its warnings (a retry) still show, bare, through Python's last-resort handler."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.test_docs import DOCS, ROOT, logging_restored, python_blocks

STARTED = "started on queues"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def the_pages_configuration() -> dict[str, object]:
    """LOGGING, as the page's block defines it."""
    [block] = python_blocks(DOCS / "logging.md")
    namespace: dict[str, object] = {}
    with logging_restored():  # the block applies it too: not to this process's later tests
        exec(block.compiled(), namespace)  # the page's own code, as the docs test runs it
    configuration = namespace["LOGGING"]
    assert isinstance(configuration, dict)
    return configuration


def uvicorn_output(database_dsn: str, *extra: str, until: str | None = None) -> str:
    """What uvicorn prints while the example app starts its worker, and stops. With `until`,
    a signup is posted once it has started, and the server runs until a line holds `until`."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "example_app.app:app", "--port", str(port), *extra],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": database_dsn},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    assert server.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 30
    try:
        for line in server.stdout:
            lines.append(line)
            if time.monotonic() > deadline:
                break
            if "Application startup complete" in line and until is None:
                break
            if "Uvicorn running on" in line:  # listening: after the startup line
                signup = urllib.request.Request(
                    f"http://127.0.0.1:{port}/signup",
                    data=json.dumps({"email": "ada@example.com", "name": "Ada"}).encode(),
                    headers={"Content-Type": "application/json"},
                )
                with urllib.request.urlopen(signup, timeout=10) as response:
                    assert response.status == 202
            if until is not None and until in line:
                break
    finally:
        server.terminate()
        rest, _ = server.communicate(timeout=30)
    return "".join(lines) + rest


@pytest.mark.timeout(120)
def test_uvicorns_default_logging_hides_the_worker_start(database_dsn: str) -> None:
    output = uvicorn_output(database_dsn)
    assert "Application startup complete" in output
    assert STARTED not in output


@pytest.mark.timeout(120)
def test_the_pages_configuration_shows_it_with_a_timestamp(
    database_dsn: str, scratch_dir: Path
) -> None:
    config_file = scratch_dir / "logging.json"
    config_file.write_text(json.dumps(the_pages_configuration()))
    output = uvicorn_output(database_dsn, "--log-config", str(config_file))
    [line] = [line for line in output.splitlines() if STARTED in line]
    assert " INFO starlette_jobs.worker: worker " in line
    assert line[:4].isdigit()  # the asctime in front
    assert "Application startup complete" in output  # uvicorn's own lines are still there


@pytest.mark.timeout(120)
def test_uvicorns_default_logging_shows_a_retry_bare(database_dsn: str) -> None:
    """A retry logs at WARNING: with no handler of its own, Python's last-resort handler prints
    the message alone, with no time, level or logger name."""
    output = uvicorn_output(database_dsn, until="retrying in")
    [line] = [line for line in output.splitlines() if "retrying in" in line]
    assert line == (
        "job 2 (example_app.jobs.sync_to_crm) failed on attempt 1/3, retrying in 0.5 s: "
        "example_app.jobs.CRMUnavailable: CRM did not answer (attempt 1)"
    )
    assert STARTED not in output  # the INFO lines stay hidden
    assert line in (DOCS / "logging.md").read_text().splitlines()  # the page shows it as it is
