"""The embedded PostgreSQL stops with the last process that uses it, however that process stops:
here the example app under a real uvicorn, and a CLI worker beside it on the same data."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.processes.cluster import _free_port
from tests.processes.support import ROOT, LoggedProcess, wait_until

Start = Callable[..., LoggedProcess]
DATA = Path(".starlette_jobs") / "example_app"  # the example app's embedded_data_dir


def postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "postmaster.pid").read_text().splitlines()[0])


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@pytest.fixture
def start(scratch_dir: Path) -> Iterator[Start]:
    """`start(*command)`: a process in `scratch_dir`, with the library of this checkout and no
    DATABASE_URL; killed at the end, and its server too."""
    started: list[LoggedProcess] = []
    env = {name: value for name, value in os.environ.items() if name != "DATABASE_URL"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])

    def run(*command: str) -> LoggedProcess:
        process = LoggedProcess([sys.executable, *command], cwd=scratch_dir, env=env)
        started.append(process)
        return process

    yield run
    for process in started:
        process.kill()
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        os.kill(postmaster_pid(scratch_dir / DATA), signal.SIGQUIT)  # left running: a failed test


def uvicorn(start: Start) -> LoggedProcess:
    app = start("-m", "uvicorn", "--port", str(_free_port()), "example_app.app:app")
    app.wait_for("Application startup complete", timeout=60)
    return app


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_the_embedded_server_stops_when_uvicorn_does(
    start: Start, scratch_dir: Path, signum: signal.Signals
) -> None:
    app = uvicorn(start)
    server = postmaster_pid(scratch_dir / DATA)
    assert alive(server)
    app.send(signum)
    app.wait(30)
    assert "Application shutdown complete" in app.output
    wait_until(lambda: not alive(server), timeout=10, what="the embedded PostgreSQL to stop")


def test_the_last_of_two_processes_on_the_same_data_stops_the_server(
    start: Start, scratch_dir: Path
) -> None:
    app = uvicorn(start)
    worker = start("-m", "starlette_jobs", "worker", "example_app.app:jobs")
    worker.wait_for("started on queues", timeout=60)
    server = postmaster_pid(scratch_dir / DATA)

    app.send(signal.SIGTERM)
    app.wait(30)
    # The worker still uses it: the same server still runs, and answers.
    status = start("-m", "starlette_jobs", "status", "example_app.app:jobs")
    assert status.wait(60) == 0, status.output
    assert "left the embedded PostgreSQL" in status.output
    assert postmaster_pid(scratch_dir / DATA) == server
    assert alive(server)
    assert worker.process.poll() is None, worker.output

    worker.send(signal.SIGTERM)
    assert worker.wait(30) == 0, worker.output
    wait_until(lambda: not alive(server), timeout=10, what="the embedded PostgreSQL to stop")
    assert "stopped the embedded PostgreSQL" in worker.output


def test_a_server_left_by_a_killed_app_is_stopped_by_the_next_user_that_exits(
    start: Start, scratch_dir: Path
) -> None:
    app = uvicorn(start)
    server = postmaster_pid(scratch_dir / DATA)
    app.kill()  # SIGKILL: no shutdown, no chance to stop the server
    assert alive(server)

    status = start("-m", "starlette_jobs", "status", "example_app.app:jobs")
    assert status.wait(60) == 0, status.output
    wait_until(lambda: not alive(server), timeout=10, what="the embedded PostgreSQL to stop")
    assert f"user processes [{app.pid}]: gone" in status.output
    assert "stopped the embedded PostgreSQL" in status.output
