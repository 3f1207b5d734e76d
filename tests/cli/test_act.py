"""`retry`, `cancel` and `release` from the command line: what each says it did to each job, the
JSON lines, and the exit status (the worst of the jobs'); `pause` and `resume`:
integration/test_cli.py."""

from __future__ import annotations

import asyncio
import getpass
import json

import pytest

from starlette_jobs import EventKind, Jobs, JobStatus, Retry, job
from starlette_jobs.cli._main import main


@job(queue="cli-act", retry=Retry.none())
async def fragile(fail: bool) -> str:
    if fail:
        raise RuntimeError("it broke")
    return "fine"


async def run(*args: str) -> int:
    return await asyncio.to_thread(main, list(args))


async def test_retry_cancel_and_release_say_what_they_did_and_exit_by_the_worst(
    database_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with Jobs(database_dsn, queues={"cli-act": 2}) as jobs:
        broken = await fragile.enqueue(fail=True)
        fine = await fragile.enqueue(fail=False)
        await jobs.wait(broken, timeout=10)
        await jobs.wait(fine, timeout=10)
    dsn = ["--dsn", database_dsn]

    # Retry the failed one (queues={} here: no worker, so it stays pending) and the one that
    # succeeded (not retried) and one that does not exist: the worst status is 3.
    assert await run("retry", str(broken), str(fine), "999999", *dsn) == 3
    assert capsys.readouterr().out.splitlines() == [
        f"job {broken}: retried (now pending)",
        f"job {fine}: not retried (now succeeded): only a failed or cancelled job is retried "
        "(a workflow's step, not before the steps it waits for that failed)",
        "job 999999: no such job",
    ]
    assert await run("cancel", str(broken), str(fine), "--json", *dsn) == 1
    outcomes = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert outcomes == [
        {"id": str(broken), "action": "cancel", "outcome": "changed"},
        {"id": str(fine), "action": "cancel", "outcome": "unchanged"},
    ]
    assert await run("release", str(broken), *dsn) == 1
    assert "not released (now cancelled): only a running job is released" in (
        capsys.readouterr().out
    )
    assert await run("release", "999999", "--json", *dsn) == 3
    assert json.loads(capsys.readouterr().out) == {
        "id": "999999",
        "action": "release",
        "outcome": "not found",
    }
    assert await run("retry", str(broken), "--by", "ops-bot", "--json", *dsn) == 0
    assert json.loads(capsys.readouterr().out)["outcome"] == "changed"
    async with Jobs(database_dsn, queues={}) as jobs:
        record = await jobs.get(broken)
        events = await jobs.events(broken)
    assert record is not None
    assert record.status is JobStatus.PENDING
    assert [e.by for e in events if e.kind is EventKind.RETRIED] == [getpass.getuser(), "ops-bot"]
    # And in the table of `events`: who asked, in its BY column.
    assert await run("events", str(broken), *dsn) == 0
    retried = [line.split() for line in capsys.readouterr().out.splitlines() if " retried " in line]
    assert [row[-2] for row in retried] == [getpass.getuser(), "ops-bot"]  # then ERROR
