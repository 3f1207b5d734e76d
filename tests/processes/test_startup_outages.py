"""At start, on a server of the test's own: an outage is reported while it lasts and when it
ends; a wrong password is a configuration mistake, not an outage."""

from __future__ import annotations

import asyncio
import os
import sys

import asyncpg
import pytest

from starlette_jobs import ConfigurationError, Jobs
from starlette_jobs import _startup as startup
from tests.processes.cluster import Cluster, _free_port
from tests.processes.support import ROOT, LoggedProcess, eventually


def lines_with(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [record.getMessage() for record in caplog.records if text in record.getMessage()]


async def test_an_outage_at_start_is_reported_again_while_it_lasts_and_when_it_ends(
    cluster: Cluster, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert startup.REPORT_EVERY == 30  # as docs/getting-started.md says; too long for a test
    monkeypatch.setattr(startup, "REPORT_EVERY", 0.3)
    caplog.set_level("INFO", logger="starlette_jobs")
    await asyncio.to_thread(cluster.stop)
    async with Jobs(cluster.dsn, queues={}) as jobs:
        assert len(lines_with(caplog, "unreachable at start")) == 1

        async def reported_twice() -> bool:
            return len(lines_with(caplog, "PostgreSQL still unreachable after")) >= 2

        await eventually(reported_twice, 20, "two more warnings")
        assert lines_with(caplog, "still unreachable after")[0].startswith(
            "PostgreSQL still unreachable after "
        )
        assert "ConnectionRefusedError" in lines_with(caplog, "still unreachable after")[0]
        assert not lines_with(caplog, "PostgreSQL is reachable")

        await asyncio.to_thread(cluster.start)

        async def reported_back() -> bool:
            return bool(lines_with(caplog, "PostgreSQL is reachable after"))

        await eventually(reported_back, 20, "the line saying it is back")
        assert (await jobs.count_by_status()) is not None
    back = [r for r in caplog.records if "PostgreSQL is reachable after" in r.getMessage()]
    assert [r.levelname for r in back] == ["INFO"]


async def test_a_wrong_password_stops_the_start_with_one_clear_line(cluster: Cluster) -> None:
    # Password authentication for one role over TCP; the rest of the cluster stays on trust.
    hba = cluster.data / "pg_hba.conf"
    hba.write_text("host all secretive 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
    connection = await asyncpg.connect(cluster.dsn)
    await connection.execute("CREATE ROLE secretive LOGIN PASSWORD 'right'")
    await connection.execute("SELECT pg_reload_conf()")
    await connection.close()
    dsn = cluster.dsn.replace("postgres@", "secretive:wr0ng@")
    for require_database in (False, True):
        with pytest.raises(ConfigurationError) as caught:
            async with Jobs(dsn, require_database=require_database):
                pass
        message = str(caught.value)
        assert "password authentication failed" in message
        assert "check the user name and password" in message
        assert "wr0ng" not in message
        assert "secretive:***@127.0.0.1" in message


async def test_a_server_back_without_the_database_is_logged_as_an_error_to_fix(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    await asyncio.to_thread(cluster.stop)
    dsn = cluster.dsn.rsplit("/", 1)[0] + "/not_created_yet"
    async with Jobs(dsn, queues={}):
        await asyncio.to_thread(cluster.start)

        async def reported() -> bool:
            return bool(lines_with(caplog, "PostgreSQL answers but refuses to start"))

        await eventually(reported, 20, "the error saying what to fix")
    (record,) = [r for r in caplog.records if "answers but refuses" in r.getMessage()]
    assert record.levelname == "ERROR"
    assert 'database "not_created_yet" does not exist' in record.getMessage()
    assert "CREATE DATABASE not_created_yet" in record.getMessage()


def test_under_uvicorn_a_mistake_ends_the_start_with_the_line_that_says_it(
    cluster: Cluster,
) -> None:
    dsn = cluster.dsn.replace("postgres@", "postgres:s3cret@").rsplit("/", 1)[0] + "/typo_db"
    app = LoggedProcess(
        [sys.executable, "-m", "uvicorn", "--port", str(_free_port()), "example_app.app:app"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": dsn},
    )
    assert app.wait(60) != 0
    lines = app.output.strip().splitlines()
    assert lines[-1].endswith("Application startup failed. Exiting.")
    assert lines[-3].startswith('starlette_jobs._errors.ConfigurationError: database "typo_db"')
    assert "asyncpg" not in app.output
    assert "s3cret" not in app.output
