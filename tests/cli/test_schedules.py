"""`starlette-jobs schedules`: the schedules a worker declared, with their next and last tick,
as a table and as JSON, read from a real database."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import pytest

from starlette_jobs import Jobs
from starlette_jobs._schedule_records import ScheduleRecord, TickRecord, TickStatus
from starlette_jobs.cli._main import main
from starlette_jobs.cli._schedules import print_schedules
from tests.conftest import eventually

APP = """
from starlette_jobs import Jobs, job, periodic

jobs = Jobs(queues={"cli-reports": 2})


@periodic("30 2 * * *", timezone="Europe/Paris", name="nightly", arguments={"kind": "sales"})
@periodic("* * * * * *", name="every-second", arguments={"kind": "pulse"}, overlap="skip")
@job(name="cli.report", queue="cli-reports")
async def report(kind: str) -> None:
    pass
"""


@pytest.fixture
def target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "cli_schedules_app.py").write_text(APP)
    monkeypatch.delitem(sys.modules, "cli_schedules_app", raising=False)
    return "cli_schedules_app:jobs"


async def ticked(jobs: Jobs) -> bool:
    return any(schedule.last_tick is not None for schedule in await jobs.schedules())


def run_a_worker_until_a_tick(dsn: str) -> None:
    """A worker of the app declares its schedules and records a tick of the fast one."""
    import cli_schedules_app  # type: ignore[import-not-found]

    async def run() -> None:
        worker: Jobs = cli_schedules_app.jobs.replace(dsn=dsn)
        async with worker:
            await eventually(lambda: ticked(worker), "a tick")

    asyncio.run(run())


def test_schedules_lists_each_with_its_next_and_last_tick(
    database_dsn: str, target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["schedules", target, "--dsn", database_dsn]) == 0
    assert "no schedules: a worker writes those its code declares" in capsys.readouterr().out
    run_a_worker_until_a_tick(database_dsn)
    assert main(["schedules", target, "--dsn", database_dsn]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split() == ["NAME", "JOB", "CRON", "ZONE", "NEXT", "TICK", "LAST", "TICK"]
    assert [row.split()[0] for row in rows] == ["every-second", "nightly"]
    every_second, nightly = rows
    assert "* * * * * *  UTC" in every_second
    assert "enqueued (job " in every_second
    assert "+00:00" in every_second
    assert "30 2 * * *" in nightly
    assert "Europe/Paris" in nightly
    assert " 02:30:00+0" in nightly  # the next tick, on Paris's wall clock
    assert nightly.rstrip().endswith("-")  # no tick yet


def test_schedules_as_json(
    database_dsn: str, target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run_a_worker_until_a_tick(database_dsn)
    assert main(["schedules", target, "--dsn", database_dsn, "--json"]) == 0
    every_second, nightly = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert every_second["name"] == "every-second"
    assert every_second["last_tick"]["status"] == "enqueued"
    assert isinstance(every_second["last_tick"]["job_id"], int)
    assert (every_second["overlap"], every_second["catch_up"]) == ("skip", "latest")
    assert nightly["arguments"] == {"kind": "sales"}
    assert nightly["last_tick"] is None
    assert nightly["next_tick"].endswith(":30:00+00:00")


def test_schedules_needs_postgresql(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schedules", "--dsn", "memory://"]) == 2
    assert "`starlette-jobs schedules` needs PostgreSQL" in capsys.readouterr().err


class _Declared:
    """A database holding a schedule whose last tick was skipped for a hostile reason (the
    error a tick met): the table is printed from whatever the rows hold."""

    async def __aenter__(self) -> _Declared:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        pass

    async def schedules(self) -> list[ScheduleRecord]:
        at = datetime(2026, 11, 26, tzinfo=UTC)
        tick = TickRecord("s\x1b[2J", at, TickStatus.SKIPPED, "boom\x1b]0;title\x07\x9b", None, at)
        return [ScheduleRecord("s\x1b[2J", "j\x7f", "q", "* * * * *", "UTC", {}, "latest", "skip",
                               at, None, tick)]  # fmt: skip


async def test_schedules_show_control_characters_as_escapes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert await print_schedules(cast("Jobs", _Declared()), as_json=False) == 0
    out = capsys.readouterr().out
    assert r"s\x1b[2J" in out
    assert r"j\x7f" in out
    assert r"boom\x1b]0;title\x07\x9b" in out
    assert not set(out) & {"\x1b", "\x07", "\x9b", "\x7f"}
