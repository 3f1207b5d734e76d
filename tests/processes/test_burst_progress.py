"""`starlette-jobs worker --burst` as an operator runs it: on a terminal (a pseudo-terminal
here), a progress line of the jobs done out of those there were; with its output piped or
logged, nothing on stdout."""

from __future__ import annotations

import asyncio
import os
import pty
import subprocess
import sys
from pathlib import Path
from subprocess import Popen
from typing import IO

from starlette_jobs import Jobs
from tests.processes.support import APP, ROOT, count, read_run_log
from tests.processes.worker_app import work


def burst(
    dsn: str, run_log: Path, stdout: int | IO[bytes], stderr: int | IO[bytes]
) -> Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "starlette_jobs", "worker", APP, "--burst"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": dsn, "RUN_LOG": str(run_log)},
        stdout=stdout,
        stderr=stderr,
    )


def read_until_closed(fd: int) -> bytes:
    """Everything written to the terminal until the process closes it (EIO on Linux)."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


async def test_on_a_terminal_a_burst_shows_the_jobs_done_by_status(
    database_dsn: str, run_log: Path, tmp_path: Path
) -> None:
    async with Jobs(database_dsn, queues={}):
        await work.enqueue_many([{"n": n} for n in range(4)])
    terminal, worker_side = pty.openpty()
    with (tmp_path / "stderr").open("wb") as log:
        worker = burst(database_dsn, run_log, stdout=worker_side, stderr=log)
        os.close(worker_side)
        screen = await asyncio.to_thread(read_until_closed, terminal)
        assert await asyncio.to_thread(worker.wait, 60) == 0
    os.close(terminal)
    lines = screen.decode().replace("\r\n", "\n").split("\r")
    assert lines[-1] == "[" + "#" * 30 + "] 4/4 jobs: 4 succeeded, 0 failed, 0 cancelled\x1b[K\n"
    assert lines[1].startswith("[" + "-" * 30 + "] 0/4 jobs")


async def test_with_its_output_piped_a_burst_writes_nothing_to_stdout(
    database_dsn: str, run_log: Path
) -> None:
    async with Jobs(database_dsn, queues={}):
        await work.enqueue_many([{"n": n} for n in range(4)])
    worker = burst(database_dsn, run_log, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stdout, stderr = await asyncio.to_thread(worker.communicate, timeout=60)
    assert worker.returncode == 0, stderr.decode()
    assert stdout == b""
    assert len(count(read_run_log(run_log), "done")) == 4  # it did run them
