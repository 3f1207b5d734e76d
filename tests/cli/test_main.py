"""The command line's entry point (`cli/_main.py`): a mistake is one line on stderr with exit
status 2, `python -m starlette_jobs` is the same command, and the in-memory store is refused.
The options are tested in test_parser.py, the target in test_target.py; real worker processes,
migrate and status on a database in integration/test_cli.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import starlette_jobs
from starlette_jobs.cli._main import main
from tests.cli.conftest import APP, Module


def test_an_error_is_one_line_on_stderr_and_exit_status_2(
    module: Module, capsys: pytest.CaptureFixture[str]
) -> None:
    name = module("cli_unit_web", "from starlette_jobs import Jobs\njobs = Jobs(queues={})\n")
    assert main(["--log-level", "error", "worker", name]) == 2
    err = capsys.readouterr().err
    assert err.startswith("starlette-jobs: error: ")
    assert err.count("\n") == 1


def test_python_dash_m_runs_the_same_command() -> None:
    """`__main__`: `python -m starlette_jobs` is `starlette-jobs`."""
    done = subprocess.run(
        [sys.executable, "-m", "starlette_jobs", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(starlette_jobs.__file__).parents[1],
        check=False,
    )
    assert (done.returncode, done.stdout.strip()) == (
        0,
        f"starlette-jobs {starlette_jobs.__version__}",
    )


MEMORY_APP = """
from starlette_jobs import Jobs
jobs = Jobs("memory://shared", queues={"emails": 3})
"""


@pytest.mark.parametrize("command", ["worker", "migrate", "status"])
@pytest.mark.parametrize("where", ["--dsn", "DATABASE_URL", "Jobs"])
def test_a_command_on_the_in_memory_store_is_refused_since_no_other_process_sees_it(
    module: Module,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
    where: str,
) -> None:
    """A worker on `memory://` would start and idle on a store that only it can see."""
    name = module(
        "cli_unit_memory",
        MEMORY_APP if where == "Jobs" else APP.replace('"postgresql://app@db/app", ', ""),
    )
    argv = ["--log-level", "error", command, name]
    if where == "--dsn":
        argv += ["--dsn", "memory://"]
    elif where == "DATABASE_URL":
        monkeypatch.setenv("DATABASE_URL", "memory://shared")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("starlette-jobs: error: ")
    assert "the in-memory store" in err
    assert "needs PostgreSQL" in err
    assert err.count("\n") == 1
