"""`starlette-jobs workers`: the live workers, as a table and as JSON, read from a real
database. A fleet of three processes: processes/test_registry.py."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import cast

import pytest

from starlette_jobs import Jobs
from starlette_jobs._worker_records import UnrunnableJobs, WorkerRecord
from starlette_jobs.cli._main import main
from starlette_jobs.cli._workers import print_workers


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


class _Registry:
    """A database whose registry holds a worker with a hostile host name: the table is printed
    from whatever the rows hold."""

    async def __aenter__(self) -> _Registry:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        pass

    async def workers(self) -> list[WorkerRecord]:
        at = datetime(2026, 11, 26, tzinfo=UTC)
        return [WorkerRecord("w1", "host\x1b]0;title\x07", 1, ("q\x9b",), ("j\x7f",), "1", at,
                             at, 10.0)]  # fmt: skip

    async def unrunnable_jobs(self) -> list[UnrunnableJobs]:
        return [UnrunnableJobs("q\x1b[2J", "j", 1, datetime(2026, 11, 26, tzinfo=UTC))]


async def test_workers_show_control_characters_as_escapes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert await print_workers(cast("Jobs", _Registry()), as_json=False) == 0
    out = capsys.readouterr().out
    assert r"host\x1b]0;title\x07" in out
    assert r"q\x9b" in out
    assert r"j\x7f" in out
    assert r"q\x1b[2J" in out
    assert not set(out) & {"\x1b", "\x07", "\x9b", "\x7f"}
