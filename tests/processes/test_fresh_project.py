"""A user's own project, outside this repository, tests its app with the plugin while its dev
worker runs on an embedded database in the same directory (the example app's, here).

Without a database of their own, the tests and the dev worker would share the directory's
embedded database: the dev worker, which does not know the tests' jobs, would claim and
fail them. With `starlette_jobs.testing`, the tests never touch the dev server's data.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.processes.support import ROOT, LoggedProcess

APP = """
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from starlette_jobs import Jobs, job


@job
async def shout(word: str) -> str:
    return word.upper()


async def post(request: Request) -> JSONResponse:
    job_id = await shout.enqueue(word=(await request.json())["word"])
    return JSONResponse({"job_id": job_id}, status_code=202)


jobs = Jobs(queues={})
app = Starlette(routes=[Route("/shout", post, methods=["POST"])], lifespan=jobs.lifespan)
"""

CONFTEST = 'pytest_plugins = ["starlette_jobs.testing"]\n'

TEST = """
import pytest
from starlette.testclient import TestClient

from myapp import app, jobs, shout
from starlette_jobs import JobStatus
from starlette_jobs.testing import assert_enqueued_now, run_enqueued_now


@pytest.mark.parametrize("word", ["hi", "there", "again", "and again"])
def test_shout(word: str, jobs_database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", jobs_database)
    with TestClient(app) as client:
        job_id = client.post("/shout", json={"word": word}).json()["job_id"]
        assert assert_enqueued_now(client, shout, word=word).id == job_id
        run_enqueued_now(client)
        record = client.portal.call(jobs.get, job_id)
    assert record is not None
    assert (record.status, record.result) == (JobStatus.SUCCEEDED, word.upper())
"""


def test_a_users_tests_pass_beside_a_dev_worker_on_the_projects_embedded_database(
    scratch_dir: Path,
) -> None:
    project = scratch_dir / "myproject"
    project.mkdir()
    (project / "myapp.py").write_text(textwrap.dedent(APP))
    (project / "conftest.py").write_text(CONFTEST)
    (project / "test_myapp.py").write_text(textwrap.dedent(TEST))
    env = {name: value for name, value in os.environ.items() if name != "DATABASE_URL"}
    env.pop("PYTHONPATH", None)  # the project sees the installed package only
    # The dev worker: the example app's jobs, on its embedded database in the directory.
    dev = LoggedProcess(
        [sys.executable, "-m", "starlette_jobs", "worker", "example_app.app:jobs"],
        cwd=project,
        env={**env, "PYTHONPATH": str(ROOT)},
    )
    try:
        dev.wait_for("started on queues", timeout=60)
        assert (project / ".starlette_jobs" / "example_app" / "PG_VERSION").exists()
        tests = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:cov"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        dev.send(signal.SIGTERM)
        dev.wait()
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "4 passed" in tests.stdout
    assert "no job named" not in dev.output  # the dev worker never saw the tests' jobs
