"""Worker processes started with the CLI, and the run log their jobs write."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.processes.worker_app:jobs"
LIMITED_APP = "tests.processes.worker_app:limited_jobs"
KEYED_APP = "tests.processes.worker_app:keyed_jobs"


class LoggedProcess:
    """A process whose output is collected line by line in the background, so a test can wait
    for a log line."""

    def __init__(self, command: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.pid = self.process.pid
        self._lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                self._lines.append(line)
                self._changed.notify_all()

    @property
    def output(self) -> str:
        with self._changed:
            return "".join(self._lines)

    def wait_for(self, text: str, timeout: float = 30) -> None:
        """Waits until a line of output contains `text`."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not any(text in line for line in self._lines):
                left = deadline - time.monotonic()
                if left <= 0 or (self.process.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(f"no line with {text!r} in:\n{''.join(self._lines)}")
                self._changed.wait(min(left, 0.1))

    def send(self, signum: signal.Signals) -> None:
        self.process.send_signal(signum)

    def wait(self, timeout: float = 60) -> int:
        """Waits for the process to exit; returns its exit code."""
        code = self.process.wait(timeout)
        self._close()
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a stopped process cannot die otherwise
            self.process.kill()
            self.process.wait(10)
        self._close()

    def _close(self) -> None:
        self._reader.join(5)
        if self.process.stdout is not None:
            self.process.stdout.close()


class WorkerProcess(LoggedProcess):
    """`python -m starlette_jobs worker tests.processes.worker_app:jobs ARGS`."""

    def __init__(self, *args: str, dsn: str, run_log: Path, app: str = APP) -> None:
        super().__init__(
            [sys.executable, "-m", "starlette_jobs", "worker", app, *args],
            cwd=ROOT,
            env={**os.environ, "DATABASE_URL": dsn, "RUN_LOG": str(run_log)},
        )


@dataclass(frozen=True)
class Event:
    kind: str  # "start", "done", ...
    n: int
    pid: int
    attempt: int
    at: float


def read_run_log(path: Path) -> list[Event]:
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        kind, n, pid, attempt, at = line.split()
        events.append(Event(kind, int(n), int(pid), int(attempt), float(at)))
    return events


def count(events: list[Event], kind: str) -> Counter[int]:
    """How many times each job logged `kind`."""
    return Counter(event.n for event in events if event.kind == kind)


def wait_until(condition: object, timeout: float = 30, what: str = "condition") -> None:
    """Polls `condition()` (a callable returning a truthy value) until it holds."""
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    """Awaits `check()` every 0.1 s until it is true."""
    try:
        async with asyncio.timeout(timeout):
            while not await check():  # noqa: ASYNC110 - the database has no event to wait on
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"timed out after {timeout} s waiting for {what}") from None
