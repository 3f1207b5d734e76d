"""What a job's values look like when they come back, on PostgreSQL and memory alike: its
arguments' and result's JSON as jsonb keeps it (keys in jsonb's order, numbers as `numeric`
writes them), its `run_at` in UTC, and its errors' entries as PostgreSQL writes them. A test
that passes on the memory store sees what production shows: `json.dumps` of a result, a status
route's body, the order a job iterates over a dict argument in."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone

from starlette_jobs import JobStatus
from starlette_jobs.store._protocol import Store
from tests.records import new_jobs, outcome


async def test_arguments_come_back_with_their_keys_in_jsonbs_order(store: Store) -> None:
    [job_id] = await store.insert_jobs(new_jobs(1, payload='{"zeta": 1, "alpha": 2, "mid": 3}'))
    record = await store.get_job(job_id)
    assert record is not None
    assert list(record.arguments) == ["mid", "zeta", "alpha"]  # shortest first, then by bytes


async def test_a_result_and_progress_come_back_as_jsonb_keeps_them(store: Store) -> None:
    """A result of `1e20` came back from the memory store as the float it was, and from
    PostgreSQL as the integer `numeric` writes; `-0.0` as itself, and as `0.0`."""
    [job_id] = await store.insert_jobs(new_jobs(1))
    [claim] = await store.claim_batch("default", 1, "w", 30)
    written = outcome(
        claim, JobStatus.SUCCEEDED, result='{"total": 1e20, "zero": -0.0, "b": 1, "aa": 2.50}'
    )
    written.progress = '{"total": 1e20, "done": 3}'
    await store.record_outcomes([written])
    record = await store.get_job(job_id)
    assert record is not None
    assert json.dumps(record.result) == (
        '{"b": 1, "aa": 2.5, "zero": 0.0, "total": 100000000000000000000}'
    )
    assert json.dumps(record.progress) == '{"done": 3, "total": 100000000000000000000}'


async def test_run_at_comes_back_in_utc_whatever_zone_it_was_given_in(store: Store) -> None:
    paris_winter = timezone(timedelta(hours=1))
    given = datetime(2030, 1, 1, 9, 0, tzinfo=paris_winter)
    [job_id] = await store.insert_jobs(dataclasses.replace(new_jobs(1), run_at=given))
    record = await store.get_job(job_id)
    assert record is not None
    assert record.run_at == given
    assert record.run_at.isoformat() == "2030-01-01T08:00:00+00:00"
    assert record.run_at.utcoffset() == timedelta(0)


async def test_an_errors_entry_is_written_in_utc_with_its_keys_in_jsonbs_order(
    store: Store,
) -> None:
    [job_id] = await store.insert_jobs(new_jobs(1))
    [claim] = await store.claim_batch("default", 1, "w", 30)
    await store.record_outcomes([outcome(claim, JobStatus.PENDING, delay=60, error="boom")])
    record = await store.get_job(job_id)
    assert record is not None
    [entry] = record.errors
    assert list(entry) == ["at", "error", "attempt", "worker_id"]
    assert (entry["error"], entry["attempt"], entry["worker_id"]) == ("boom", 1, "w")
    at = datetime.fromisoformat(entry["at"])
    assert at.utcoffset() == timedelta(0)
    assert abs(at - datetime.now(UTC)) < timedelta(minutes=1)
