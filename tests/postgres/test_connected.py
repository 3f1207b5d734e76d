"""The worker's hot statements find their rows through an index even when their plan was made on
an empty table (a worker started on a new database, then a burst of jobs): a plan is kept until
autovacuum's ANALYZE, and one that reads the whole table made each claim 17 ms at 200,000 jobs
(postgres/_connected.py). The rest of `_connected` is tested through the store:
postgres/test_store.py."""

from __future__ import annotations

from starlette_jobs import job
from starlette_jobs.postgres._lanes import Lane
from tests.conftest import StartJobs, on_postgres


@job(queue="plans")
async def tiny(n: int) -> int:
    return n


def _literal(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "ARRAY[" + ", ".join(map(_literal, value)) + "]::text[]"
    return "'" + str(value).replace("'", "''") + "'"


async def _plan(lane: Lane, statement_start: str, *args: object) -> str:
    """The plan the lane's connection would run its prepared statement with, as JSON text."""
    connection = lane._connection
    assert connection is not None
    name = await connection.fetchval(
        "SELECT name FROM pg_prepared_statements WHERE statement LIKE $1", f"%{statement_start}%"
    )
    assert name is not None, f"no prepared statement like {statement_start!r}"
    values = ", ".join(map(_literal, args))
    rows = await connection.fetch(f'EXPLAIN (FORMAT JSON) EXECUTE "{name}"({values})')
    return str(rows[0][0])


async def test_a_claim_planned_on_an_empty_table_reads_the_index_once_the_table_fills(
    start_jobs: StartJobs,
) -> None:
    async with start_jobs(queues={"plans": 10}) as jobs:
        for n in range(10):  # the worker's statements are prepared, on an empty table
            assert await jobs.result(tiny, await tiny.enqueue(n=n), timeout=10) == n
        await jobs.pause("plans")
        for start in range(0, 20_000, 5_000):
            await tiny.enqueue_many({"n": n} for n in range(start, start + 5_000))

        store = on_postgres(jobs)
        plan = await _plan(
            store._claimer, "picked AS", "plans", 10, jobs.worker_id, 30.0, [tiny.name]
        )
        assert '"Relation Name": "starlette_jobs"' in plan
        assert '"Node Type": "Seq Scan"' not in plan, plan


async def test_the_worker_lanes_never_choose_a_sequential_scan_of_their_own(
    start_jobs: StartJobs,
) -> None:
    async with start_jobs(queues={"plans": 1}) as jobs:
        assert await jobs.result(tiny, await tiny.enqueue(n=1), timeout=10) == 1
        store = on_postgres(jobs)
        for lane in (store._claimer, store._writer):
            # Under the lane's lock: the worker may be claiming on it right now.
            async with lane._lock:
                connection = lane._connection
                assert connection is not None
                assert await connection.fetchval("SHOW enable_seqscan") == "off"
