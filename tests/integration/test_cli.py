"""The `starlette-jobs` command: worker processes, migrate, status."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import asyncpg
import pytest

from starlette_jobs import Jobs, JobStatus
from starlette_jobs._cli import _load_jobs, main
from tests.integration.cli_app import record_run

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, dsn: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "starlette_jobs", *args],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": dsn, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(process: subprocess.Popen[str], timeout: float = 120) -> str:
    output, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, output
    return output


async def test_two_worker_processes_run_a_thousand_jobs_each_exactly_once(
    database_dsn: str, tmp_path: Path
) -> None:
    log = tmp_path / "runs.log"
    async with Jobs(database_dsn, queues={}) as jobs:
        await record_run.enqueue_many([{"n": n} for n in range(1000)])
        workers = [
            cli("worker", "tests.integration.cli_app:jobs", "--burst", dsn=database_dsn,
                RUN_LOG=str(log))
            for _ in range(2)
        ]  # fmt: skip
        outputs = [finish(worker) for worker in workers]
        counts = await jobs.count_by_status()
    runs = [line.split() for line in log.read_text().splitlines()]
    per_job = Counter(int(n) for n, _ in runs)
    assert sorted(per_job) == list(range(1000))
    assert set(per_job.values()) == {1}, "a job ran more than once"
    assert len({pid for _, pid in runs}) == 2, "both workers should have taken jobs"
    assert counts[JobStatus.SUCCEEDED] == 1000
    assert all("started on queues {'default': 5}" in output for output in outputs)


def test_sigterm_stops_a_worker_cleanly(database_dsn: str, tmp_path: Path) -> None:
    worker = cli("worker", "tests.integration.cli_app:jobs", "--queue", "default=2",
                 dsn=database_dsn, RUN_LOG=str(tmp_path / "log"))  # fmt: skip
    assert worker.stdout is not None
    for line in worker.stdout:
        if "started on queues {'default': 2}" in line:
            break
    worker.terminate()
    output = finish(worker, timeout=30)
    assert "SIGTERM received: shutting down" in output
    assert "stopped" in output


def test_migrate_and_status(database_dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    async def reset() -> None:
        connection = await asyncpg.connect(database_dsn)
        await connection.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        await connection.close()

    asyncio.run(reset())
    assert main(["migrate", "--dsn", database_dsn]) == 0
    assert "applied 0001_initial.sql, 0002_autovacuum.sql" in capsys.readouterr().out
    assert main(["migrate", "--dsn", database_dsn]) == 0
    assert capsys.readouterr().out.strip() == "migrations up to date"
    assert main(["status", "tests.integration.cli_app:jobs", "--dsn", database_dsn]) == 0
    assert [line.split() for line in capsys.readouterr().out.strip().splitlines()] == [
        ["pending", "0"],
        ["running", "0"],
        ["succeeded", "0"],
        ["failed", "0"],
        ["cancelled", "0"],
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["worker", "no_such_module_x:jobs"], "cannot import 'no_such_module_x'"),
        (["worker", "tests.integration.cli_app:nothing"], "has no attribute 'nothing'"),
        (["worker", "tests.integration.cli_app:jobs", "--queue", "q=x"], "NAME=CONCURRENCY"),
        (["worker", "tests.integration"], "expected a Jobs instance"),
    ],
)
def test_cli_errors_are_clear(
    database_dsn: str, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*args, "--dsn", database_dsn]) == 2
    assert message in capsys.readouterr().err


def test_an_app_path_finds_the_jobs_instance_of_its_module() -> None:
    import example_app.app

    assert _load_jobs("example_app.app:app") is example_app.app.jobs
    assert _load_jobs("example_app.app") is example_app.app.jobs


def test_an_invalid_concurrency_is_a_usage_error(
    database_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["worker", "tests.integration.cli_app:jobs", "--queue", "q=0"]) == 2
    assert "concurrency must be a positive integer" in capsys.readouterr().err
