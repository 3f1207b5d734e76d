"""`starlette-jobs workers`: the live workers, as a table and as JSON, read from a real
database. A fleet of three processes: processes/test_registry.py."""

from __future__ import annotations

import asyncio
import json

import pytest

from starlette_jobs import Jobs
from starlette_jobs.cli._main import main


async def test_workers_lists_a_running_worker_as_a_table_and_as_json(
    database_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await asyncio.to_thread(main, ["workers", "--dsn", database_dsn]) == 0
    assert "no live workers" in capsys.readouterr().out
    async with Jobs(database_dsn, queues={"cli-a": 1, "cli-b": 1}) as jobs:
        worker_id = jobs.worker_id
        assert await asyncio.to_thread(main, ["workers", "--dsn", database_dsn]) == 0
        header, row = capsys.readouterr().out.splitlines()
        assert header.split() == ["ID", "HOST", "PID", "QUEUES", "JOBS", "VERSION", "STARTED",
                                  "LAST", "SEEN"]  # fmt: skip
        assert row.startswith(f"{jobs.worker_id}  ")
        assert " cli-a,cli-b " in row
        assert await asyncio.to_thread(main, ["workers", "--dsn", database_dsn, "--json"]) == 0
        [listed] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert listed["id"] == worker_id
    assert listed["queues"] == ["cli-a", "cli-b"]
    assert listed["heartbeat_seconds"] == 10.0
    assert listed["started_at"] <= listed["last_seen"]


def test_workers_needs_postgresql(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workers", "--dsn", "memory://"]) == 2
    assert "`starlette-jobs workers` needs PostgreSQL" in capsys.readouterr().err
