"""How fast retention can delete finished jobs, and what limits it: a throw-away database filled
with old finished jobs (one event row each, as a job that failed once, then succeeded, leaves:
the failure, with its attempt's claim; the claims and a success are read from the job row,
docs/events.md, so a job that succeeds at once leaves none; before migration 0017 it left
two), then emptied
by the store's own `prune_finished` query in batches of several sizes, and by two variants that
tell its parts apart. The alternative design, finished jobs moved into a table partitioned by
finish time whose old partitions are dropped, is measured too: the move, and the drop.

    python benchmarks/retention.py [--jobs 200000] [--dsn URL]

Each line is one way of removing the same `--jobs` rows, filled afresh and vacuumed before it:

    prune_finished, batch B   the store's query (jobs and their events), LIMIT B, repeated
                              until a batch comes back short: jobs/s, and ms per statement
    jobs only, batch B        the same without the events' DELETE (what the events cost)
    move to history, batch B  DELETE ... RETURNING into INSERT into a table partitioned by
                              finish time (one partition per minute): the per-row work the
                              partitioned design does instead of the delete (events not moved)
    drop partitions           DROP TABLE of the history's partitions, once the move is done

Set-up: `--dsn`, else `DATABASE_URL`, else the embedded PostgreSQL in a temporary data
directory; a dedicated database is created and dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from datetime import timedelta
from typing import Any

import asyncpg
from _server import on_a_server, throw_away_database

from starlette_jobs import Jobs
from starlette_jobs.postgres._migrations import queries

_MINUTE = timedelta(minutes=1)
RETENTION = 3600.0  # every filled job finished two hours ago: all are past it
BATCHES = (1_000, 5_000, 10_000, 20_000)

FILL_JOBS = """
INSERT INTO starlette_jobs (name, queue, payload, status, attempts, max_attempts, created_at,
                            started_at, finished_at, worker_id)
SELECT 'bench.work', 'default', jsonb_build_object('n', i, 'note', repeat('x', 100)),
       'succeeded', 1, 3, t, t, t, 'bench-worker'
  FROM generate_series(1, $1) AS i,
       LATERAL (SELECT now() - interval '2 hours' + i * interval '1 ms' AS t) AS at
"""
FILL_EVENTS = """
INSERT INTO starlette_jobs_events (job_id, at, kind, status, attempt, worker_id, error, run_at,
                                   claimed_at, claimed_attempt)
SELECT job.id, job.started_at, 'attempt_failed', 'pending', 1, 'bench-worker', 'boom',
       job.started_at, job.started_at, 1
  FROM starlette_jobs AS job
"""
JOBS_ONLY = """
WITH old AS (
    SELECT id FROM starlette_jobs
     WHERE status IN ('succeeded', 'failed', 'cancelled')
       AND finished_at < now() - make_interval(secs => $1)
     ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED
), deleted AS (
    DELETE FROM starlette_jobs AS job USING old WHERE job.id = old.id RETURNING job.id
)
SELECT count(*) FROM deleted
"""
MOVE = """
WITH old AS (
    SELECT id FROM starlette_jobs
     WHERE status IN ('succeeded', 'failed', 'cancelled')
       AND finished_at < now() - make_interval(secs => $1)
     ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED
), moved AS (
    DELETE FROM starlette_jobs AS job USING old WHERE job.id = old.id RETURNING job.*
), kept AS (
    INSERT INTO bench_history SELECT * FROM moved RETURNING 1
)
SELECT count(*) FROM kept
"""


async def fill(connection: asyncpg.Connection[Any], jobs: int) -> None:
    await connection.execute("TRUNCATE starlette_jobs, starlette_jobs_events")
    await connection.execute(FILL_JOBS, jobs)
    await connection.execute(FILL_EVENTS)
    await connection.execute("VACUUM ANALYZE starlette_jobs")
    await connection.execute("VACUUM ANALYZE starlette_jobs_events")


async def history_table(connection: asyncpg.Connection[Any]) -> list[str]:
    """bench_history, like starlette_jobs, partitioned by finish time, one partition a minute
    over the fill's span; returns the partitions' names."""
    await connection.execute("DROP TABLE IF EXISTS bench_history")
    await connection.execute(
        "CREATE TABLE bench_history (LIKE starlette_jobs) PARTITION BY RANGE (finished_at)"
    )
    start = await connection.fetchval(
        "SELECT date_trunc('minute', min(finished_at)) FROM starlette_jobs"
    )
    end = await connection.fetchval("SELECT max(finished_at) FROM starlette_jobs")
    names = []
    while start <= end:
        name = f"bench_history_{len(names)}"
        await connection.execute(
            f"CREATE TABLE {name} PARTITION OF bench_history FOR VALUES FROM "
            f"('{start.isoformat()}') TO ('{(start + _MINUTE).isoformat()}')"
        )
        names.append(name)
        start += _MINUTE
    await connection.execute("CREATE INDEX ON bench_history (finished_at)")
    return names


async def empty_in_batches(
    connection: asyncpg.Connection[Any], query: str, batch: int
) -> tuple[int, float, float]:
    """Runs `query` until a batch comes back short: (rows, seconds, slowest statement s). The
    store's own query starts each batch after the last job the last one looked at, as a round
    does, until one looked at the last old job."""
    total, slowest = 0, 0.0
    started = time.perf_counter()
    after = None
    while True:
        before = time.perf_counter()
        if "$4" in query:  # prune_finished: its cursor
            finished_at, job_id = (None, None) if after is None else after
            row = await connection.fetchrow(query, RETENTION, batch, finished_at, job_id)
            assert row is not None
            deleted, full = row["deleted"], row["looked_at"] == batch
            after = (row["last_finished_at"], row["last_id"])
        else:
            deleted = await connection.fetchval(query, RETENTION, batch)
            full = deleted == batch
        slowest = max(slowest, time.perf_counter() - before)
        total += deleted
        if not full:
            return total, time.perf_counter() - started, slowest


def report(label: str, rows: int, seconds: float, batch: int, slowest: float) -> None:
    statements = -(-rows // batch) if batch else 1
    print(
        f"{label:<28} {rows / seconds:>9,.0f} jobs/s  {seconds * 1000 / statements:>8.1f} ms "
        f"per statement (slowest {slowest * 1000:.0f} ms)",
        flush=True,
    )


async def measure(dsn: str, jobs: int) -> None:
    prune = queries()["prune_finished"]
    async with throw_away_database(dsn, "starlette_jobs_retention") as database:
        async with Jobs(database, queues={}):  # migrates it
            pass
        connection: asyncpg.Connection[Any] = await asyncpg.connect(database)
        try:
            print(f"{jobs:,} finished jobs, {jobs:,} events, removed each way:\n", flush=True)
            cases = [(f"prune_finished, batch {batch}", prune, batch) for batch in BATCHES]
            cases += [(f"jobs only, batch {batch}", JOBS_ONLY, batch) for batch in (1_000, 10_000)]
            for label, query, batch in cases:
                await fill(connection, jobs)
                rows, seconds, slowest = await empty_in_batches(connection, query, batch)
                report(label, rows, seconds, batch, slowest)
            for batch in (1_000, 10_000):
                await fill(connection, jobs)
                partitions = await history_table(connection)
                rows, seconds, slowest = await empty_in_batches(connection, MOVE, batch)
                report(f"move to history, batch {batch}", rows, seconds, batch, slowest)
            started = time.perf_counter()
            for name in partitions:
                await connection.execute(f"DROP TABLE {name}")
            seconds = time.perf_counter() - started
            print(
                f"{'drop partitions':<28} {rows / seconds:>9,.0f} jobs/s  "
                f"{seconds * 1000 / len(partitions):>8.1f} ms per partition "
                f"({len(partitions)} partitions)"
            )
        finally:
            await connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200_000, help="finished jobs to remove")
    parser.add_argument("--dsn", help="PostgreSQL server URL (default DATABASE_URL, else embedded)")
    args = parser.parse_args()
    dsn = args.dsn or os.environ.get("DATABASE_URL")
    asyncio.run(on_a_server(dsn, lambda server: measure(server, args.jobs)))


if __name__ == "__main__":
    main()
