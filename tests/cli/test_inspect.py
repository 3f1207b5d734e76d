"""`status`, `list`, `show`, `events` and `peek` from the command line, as tables and as JSON,
on a real database, with their exit statuses."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest
from opentelemetry.sdk.trace import TracerProvider

from starlette_jobs import Jobs, Retry, job
from starlette_jobs._correlation import correlation_scope
from starlette_jobs.cli._main import main


@job(queue="cli-inspect", retry=Retry.none())
async def greet(name: str) -> str:
    if name == "boom":
        raise ValueError("no greeting for boom")
    return f"hello {name}"


@job(queue="cli-other")
async def other() -> None:
    pass


async def run(*args: str) -> int:
    return await asyncio.to_thread(main, list(args))


def lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


def parsed(capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    return [json.loads(line) for line in lines(capsys)]


async def _three_jobs(dsn: str) -> Sequence[int]:
    async with Jobs(dsn, queues={"cli-inspect": 2}) as jobs:
        ok = await greet.enqueue(name="ada")
        boom = await greet.enqueue(name="boom")
        assert await jobs.result(greet, ok, timeout=10) == "hello ada"
        await jobs.wait(boom, timeout=10)
    async with Jobs(dsn, queues={}):
        waiting = await other.enqueue()
    return ok, boom, waiting


async def test_status_counts_every_queue_or_one(
    database_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    await _three_jobs(database_dsn)
    assert await run("status", "--dsn", database_dsn) == 0
    assert "succeeded  1" in lines(capsys)
    assert await run("status", "--queue", "cli-other", "--dsn", database_dsn, "--json") == 0
    [counts] = parsed(capsys)
    assert (counts["pending"], counts["succeeded"], counts["failed"]) == (1, 0, 0)
    assert counts["capped"] == []


async def test_status_caps_the_finished_counts_at_cap(
    database_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with Jobs(database_dsn, queues={"cli-inspect": 2}) as jobs:
        for name in ("ada", "bob"):
            await jobs.wait(await greet.enqueue(name=name), timeout=10)
    assert await run("status", "--cap", "1", "--dsn", database_dsn) == 0
    output = lines(capsys)
    assert "succeeded  1+" in output
    assert "(+: 1 or more; finished jobs are counted up to --cap)" in output
    assert await run("status", "--cap", "1", "--json", "--dsn", database_dsn) == 0
    [counts] = parsed(capsys)
    assert (counts["succeeded"], counts["capped"]) == (1, ["succeeded"])


async def test_list_filters_by_status_queue_and_name_and_pages(
    database_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ok, boom, waiting = await _three_jobs(database_dsn)
    assert await run("list", "--dsn", database_dsn) == 0
    header, *rows = lines(capsys)
    assert header.split()[:4] == ["ID", "NAME", "QUEUE", "STATUS"]
    assert [int(row.split()[0]) for row in rows] == [waiting, boom, ok]

    assert await run("list", "--status", "failed", "--json", "--dsn", database_dsn) == 0
    [failed] = parsed(capsys)
    assert (failed["id"], failed["status"]) == (boom, "failed")
    assert "no greeting for boom" in str(failed["last_error"])
    assert await run("list", "--name", greet.name, "--queue", "cli-inspect", "--json",
                     "--dsn", database_dsn) == 0  # fmt: skip
    assert [found["id"] for found in parsed(capsys)] == [boom, ok]

    assert await run("list", "--limit", "2", "--dsn", database_dsn) == 0
    *_, more = lines(capsys)
    assert more == f"(the 2 most recent; the next page: --before {boom})"
    assert await run("list", "--limit", "2", "--before", str(boom), "--json",
                     "--dsn", database_dsn) == 0  # fmt: skip
    assert [found["id"] for found in parsed(capsys)] == [ok]
    assert await run("list", "--status", "cancelled", "--dsn", database_dsn) == 0
    assert lines(capsys) == ["no jobs match"]
    # Finished in the last hour: the pending job has not finished.
    assert await run("list", "--since", "1h", "--json", "--dsn", database_dsn) == 0
    assert [found["id"] for found in parsed(capsys)] == [boom, ok]
    assert await run("list", "--since", "2099-01-01T00:00:00Z", "--dsn", database_dsn) == 0
    assert lines(capsys) == ["no jobs match"]


async def test_show_and_events_tell_one_jobs_story(
    database_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ok, boom, _ = await _three_jobs(database_dsn)
    assert await run("show", str(ok), "--dsn", database_dsn) == 0
    shown = lines(capsys)
    assert "status      succeeded" in shown
    assert 'result      "hello ada"' in shown
    assert any(line.split()[2:3] == ["claimed"] for line in shown)

    assert await run("show", str(boom), "--json", "--dsn", database_dsn) == 0
    [record] = parsed(capsys)
    assert record["arguments"] == {"name": "boom"}
    history = record["events"]
    assert isinstance(history, list)
    assert [event["kind"] for event in history] == ["enqueued", "claimed", "failed"]

    assert await run("events", str(boom), "--json", "--dsn", database_dsn) == 0
    kinds = [event["kind"] for event in parsed(capsys)]
    assert kinds == ["enqueued", "claimed", "failed"]
    assert await run("events", str(boom), "--dsn", database_dsn) == 0
    assert lines(capsys)[0].split() == [
        *("AT", "KIND", "STATUS", "ATTEMPT", "WORKER", "BY", "ERROR")
    ]


async def test_the_error_columns_say_what_the_job_raised(
    database_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, boom, _ = await _three_jobs(database_dsn)
    assert await run("list", "--status", "failed", "--dsn", database_dsn) == 0
    assert lines(capsys)[1].endswith("ValueError: no greeting for boom")
    assert await run("events", str(boom), "--dsn", database_dsn) == 0
    assert lines(capsys)[-1].endswith("ValueError: no greeting for boom")


HOSTILE = "x@example.com\x1b[2J\x1b]0;title\x07\x1b[8mhidden\x9b0m\x7f\r"
"""What a user may type into a job's argument, and the job put into its error: clear the screen,
retitle the window, hide text (ESC, BEL, a C1 CSI, DEL, a carriage return)."""


@job(queue="cli-inspect", retry=Retry.none())
async def echo(text: str) -> None:
    raise ValueError(f"no such address: {text}")


async def test_stored_text_cannot_drive_the_operators_terminal(
    database_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with Jobs(database_dsn, queues={"cli-inspect": 1}) as jobs:
        failed = await echo.enqueue(text=HOSTILE)
        await jobs.wait(failed, timeout=10)
        assert await jobs.retry(failed, by=f"ops{HOSTILE}")
    capsys.readouterr()
    for command in ("show", "events"):
        assert await run(command, str(failed), "--dsn", database_dsn) == 0
        out = capsys.readouterr().out
        assert not set(out) & {"\x1b", "\x07", "\x9b", "\x7f", "\r"}, command
        assert "ops" + r"x@example.com\x1b[2J\x1b]0;title\x07" in out, command
    assert await run("list", "--dsn", database_dsn) == 0
    out = capsys.readouterr().out
    assert r"no such address: x@example.com\x1b[2J\x1b]0;title\x07" in out
    assert not set(out) & {"\x1b", "\x07", "\x9b", "\x7f", "\r"}


async def test_list_filters_by_trace_and_correlation_id_and_show_names_both(
    database_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    provider = TracerProvider()
    async with Jobs(database_dsn, queues={}, tracer_provider=provider):
        with (
            correlation_scope("req-cli"),
            provider.get_tracer("tests").start_as_current_span("POST /greet") as span,
        ):
            trace_id = format(span.get_span_context().trace_id, "032x")
            traced = await greet.enqueue(name="traced")
        await greet.enqueue(name="untraced")

    assert await run("list", "--trace-id", trace_id.upper(), "--json", "--dsn", database_dsn) == 0
    [found] = parsed(capsys)
    assert (found["id"], found["trace_id"], found["correlation_id"]) == (
        traced,
        trace_id,
        "req-cli",
    )
    assert await run("list", "--correlation-id", "req-cli", "--dsn", database_dsn) == 0
    _, row = lines(capsys)
    assert int(row.split()[0]) == traced
    assert await run("list", "--correlation-id", "req-none", "--dsn", database_dsn) == 0
    assert lines(capsys) == ["no jobs match"]
    assert await run("show", str(traced), "--dsn", database_dsn) == 0
    shown = lines(capsys)
    assert f"trace id    {trace_id}" in shown
    assert "request id  req-cli" in shown  # the correlation id: its x-request-id


@pytest.mark.parametrize("command", ["show", "events"])
async def test_a_job_that_does_not_exist_exits_3(
    database_dsn: str, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    assert await run(command, "999999", "--dsn", database_dsn) == 3
    assert lines(capsys) == ["starlette-jobs: no job with id 999999"]
    # What no job id can be is a typo, told apart from a job that is gone (test_parser.py).
    with pytest.raises(SystemExit) as exited:
        await run(command, "not-an-id", "--dsn", database_dsn)
    assert exited.value.code == 2


async def test_peek_shows_what_the_next_claim_takes(
    database_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, waiting = await _three_jobs(database_dsn)
    assert await run("peek", "cli-other", "--json", "--dsn", database_dsn) == 0
    assert [found["id"] for found in parsed(capsys)] == [waiting]
    assert await run("peek", "cli-empty", "--dsn", database_dsn) == 0
    assert lines(capsys) == ["no job of queue 'cli-empty' is due"]


@pytest.mark.parametrize(
    "args",
    [["list", "--limit", "0"], ["list", "--status", "lost"], ["peek", "q", "--limit", "101"],
     ["list", "--before", "x"], ["list", "--trace-id", "xyz"], ["list", "--since", "yesterday"],
     ["list", "--since", "-1h"]],
)  # fmt: skip
def test_a_malformed_command_line_exits_2(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_an_unreachable_database_exits_4(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--dsn", "postgresql://app@127.0.0.1:1/app"]) == 4
    assert capsys.readouterr().err.startswith("starlette-jobs: error: PostgreSQL is unreachable")


def test_a_dsn_with_an_impossible_port_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["list", "--dsn", "postgresql://postgres@127.0.0.1:99999/x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "starlette-jobs: error: invalid DSN postgresql://postgres@127.0.0.1:99999/x"
    )
    assert err.count("\n") == 1
