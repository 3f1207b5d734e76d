"""Fixtures of the process tests: worker processes that never outlive a test, a run log, and a
PostgreSQL server of the test's own for the outage tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import asyncpg
import pytest

from tests.processes.cluster import Cluster
from tests.processes.support import APP, WorkerProcess

StartWorker = Callable[..., WorkerProcess]


@pytest.fixture
def run_log(tmp_path: Path) -> Path:
    return tmp_path / "runs.log"


@pytest.fixture
def start_worker(run_log: Path) -> Iterator[StartWorker]:
    """`start_worker(*cli_args, dsn=..., app=...)`: a worker process, killed at the end if still
    alive."""
    started: list[WorkerProcess] = []

    def start(*args: str, dsn: str, app: str = APP) -> WorkerProcess:
        worker = WorkerProcess(*args, dsn=dsn, run_log=run_log, app=app)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.kill()


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A running PostgreSQL of this test's own, with an empty database `jobs` (see `.dsn`)."""
    own = Cluster()
    try:
        own.start()

        async def create_database() -> None:
            connection = await asyncpg.connect(own.dsn)
            await connection.execute("CREATE DATABASE jobs")
            await connection.close()

        asyncio.run(create_database())
        own.dsn = own.dsn.rsplit("/", 1)[0] + "/jobs"
        yield own
    finally:
        own.remove()
