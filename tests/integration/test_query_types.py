"""What PostgreSQL infers for every parameter of sql/queries.sql, pinned.

An untyped parameter takes the type of what it meets first: `coalesce($5, 0)` made a delay an
integer, so 0.6 s became 0 and 2.9 s became 2. Each query is prepared on the real server and
its parameter types compared with what the query's header says they are.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from starlette_jobs import job
from starlette_jobs.postgres._migrations import queries
from tests.conftest import StartJobs

INSERT = ["text", "text", "jsonb", "int4", "float8", "timestamptz", "int4", "jsonb"]
EXPECTED: dict[str, list[str]] = {
    "lock_migrations": ["int8"],
    "schema_exists": ["name"],
    "current_schema": [],
    "create_migrations_table": [],
    "applied_migrations": [],
    "record_migration": ["int4", "text"],
    "insert_job_now": ["text", "text", "jsonb", "int4", "int4", "jsonb"],
    "insert_job": [*INSERT, "bool"],
    "insert_unique_job": [*INSERT, "text", "bool", "text"],
    "reserve_job_ids": ["int4", "text", "text", "text", "jsonb"],
    "insert_reserved_jobs": [
        *["int8[]", "text[]", "text[]", "jsonb", "int4[]", "float8[]", "timestamptz[]", "int4[]"],
        *["text[]", "text[]", "text[]", "bool[]"],
    ],
    "insert_jobs": [*INSERT, "bool"],
    "claim_batch": ["text", "int8", "text", "float8", "text[]"],
    "record_outcomes": [
        *["int8[]", "uuid[]", "text[]", "float8[]", "text[]", "text[]", "text[]", "bool"]
    ],
    "record_successes": ["int8[]", "uuid[]", "text[]", "bool"],
    "record_plain_successes": ["int8[]", "uuid[]", "text[]"],
    "locked_jobs": ["int8[]"],
    "complete_job": ["int8", "uuid", "jsonb", "bool"],
    "record_progress": ["int8[]", "uuid[]", "text[]"],
    "extend_leases": ["int8[]", "uuid[]", "float8"],
    "release_jobs": ["int8[]", "uuid[]", "bool"],
    "release_unknown_claims": ["text", "text", "uuid[]", "bool"],
    "release_job": ["int8", "bool", "text"],
    "release_worker_jobs": ["text", "bool"],
    "prune_finished": ["float8", "int8", "timestamptz", "int8"],
    "forget_empty_workflows": ["int8[]"],
    "rescue_expired": ["int8", "bool"],
    "get_job": ["int8"],
    "list_jobs": ["text", "text", "int8", "text", "int8", "text", "text", "int8"],
    "count_by_status": [],
    "count_by_status_of_queue": ["text"],
    "queue_depths": [],
    "status_counts": ["text", "int4"],
    "status_counts_all": ["int4"],
    "add_throughput": ["text[]", "timestamptz[]", "int8[]", "int8[]", "int8[]", "int4"],
    "throughput": ["timestamptz", "text"],
    "count_unfinished": ["text[]", "float8", "float8", "text[]"],
    "cancel_job": ["int8", "bool", "text"],
    "retry_job": ["int8", "bool", "text"],
    "job_status": ["int8"],
    "peek_jobs": ["text", "int8", "int8[]"],
    "job_events": ["int8"],
    "want_outcome": ["int8"],
    "declare_schedules": ["text[]", "text[]", "text[]"],
    "list_schedules": [],
    "lock_schedule": ["text", "text"],
    "record_tick": [
        *["text", "timestamptz", "text", "text", "text", "text", "text", "jsonb", "int4", "int4"],
        "text",
    ],
    "start_waiting_tick": ["text", "text", "text", "jsonb", "int4", "int4"],
    "schedule_ticks": ["text", "int8"],
    "prune_ticks": ["int8"],
    "set_queue_paused": ["text", "bool"],
    "declare_queues": ["text[]", "int4[]", "text[]", "int4[]", "int4[]", "float8[]"],
    "queue_controls": ["text[]"],
    "lock_queue": ["text"],
    "claim_limited_batch": [
        *("text", "int8", "text", "float8", "int8", "uuid[]", "text[]"),
    ],
    "wake_queues": ["text[]"],
    "register_worker": ["text", "text", "int4", "text[]", "text[]", "text", "float8", "jsonb"],
    "worker_schedules": [],
    "worker_seen": ["text"],
    "unregister_worker": ["text"],
    "list_workers": ["float8"],
    "unrunnable_jobs": ["text[]", "int8", "float8"],
    "prune_workers": ["float8"],
    "hold_liveness": ["text"],
    "end_stale_liveness": ["text", "text[]", "int4"],
    "wait_for_liveness": ["text", "text"],
    "lockless_workers": ["text"],
    "rescue_dead_workers": ["int8", "bool", "text", "text[]", "timestamptz[]"],
    "insert_workflow": [
        *["text", "jsonb", "text", "jsonb", "text[]", "text[]", "int4[]", "int4[]", "text"],
        *["int4[]", "int4[]", "int4[]", "int4[]", "text", "text", "text", "text[]", "int4"],
    ],
    "settle_steps": ["int8", "bool", "int8"],
    "upstream_results": ["int8"],
    "get_workflow": ["int8"],
    "list_workflows": ["int8", "int8"],
    "workflow_steps": ["int8"],
    "lock_steps": ["int8[]"],
    "brief_lock_waits": [],
    "reopen_steps": ["int8[]", "bool"],
    "recount_retried_steps": ["int8[]", "bool", "text"],
    "cancel_workflow": ["int8", "bool"],
    "workflow_of": ["int8"],
    "lock_step_workflow": ["int8"],
    "lock_adding_step": ["int8", "uuid"],
    "lock_workflow": ["int8"],
    "steps_named": ["int8", "text[]"],
    "add_steps": [
        *["int8", "int8", "text[]", "text[]", "text[]", "jsonb", "int4[]", "int4[]", "int4[]"],
        *["int4[]", "int4[]"],
    ],
    "begin_bulk": ["text", "text", "text", "text", "text", "text[]", "timestamptz"],
    "bulk_retry_batch": ["int8", "int8", "bool"],
    "bulk_cancel_batch": ["int8", "int8", "bool"],
    "get_bulk": ["int8"],
    "list_bulks": ["int8"],
    "prune_bulks": ["float8"],
    "finished_since": ["timestamptz", "int8", "int8", "int8"],
    "list_jobs_among": ["text", "text", "int8", "text", "int8", "text", "text", "int8", "int8[]"],
    "list_finished_jobs": [
        *("text", "text", "int8", "text", "int8", "text", "text", "int8", "timestamptz"),
    ],
}


async def test_every_query_parameter_has_the_type_its_header_promises(
    connection: asyncpg.Connection[Any],
) -> None:
    inferred = {}
    for name, text in queries().items():
        statement = await connection.prepare(text)
        inferred[name] = [parameter.name for parameter in statement.get_parameters()]
    assert inferred == EXPECTED


@job
async def later(n: int) -> None: ...


@pytest.mark.parametrize("delay", [0.6, 2.9, 10.99])
async def test_a_fractional_delay_is_kept_to_the_millisecond(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any], delay: float
) -> None:
    async with start_jobs(queues={}):
        single = await later.configure(delay=delay).enqueue(n=1)
        unique = await later.configure(delay=delay, unique_key="k").enqueue(n=2)
        batch = await later.configure(delay=delay).enqueue_many([{"n": 3}, {"n": 4}])
    rows = await connection.fetch(
        "SELECT extract(epoch FROM run_at - created_at)::float8 AS waits FROM starlette_jobs"
        " WHERE id = ANY($1::bigint[])",
        [single, unique, *batch],
    )
    assert len(rows) == 4
    for row in rows:
        assert row["waits"] == pytest.approx(delay, abs=0.05)
