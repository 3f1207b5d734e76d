"""How long `jobs.count_by_status` takes with many finished jobs kept (docs/performance.md,
"Counting jobs by status"): a throw-away database with `--finished` finished jobs (one in 50
failed) spread over four queues and `--pending` pending ones, vacuumed as autovacuum leaves a
table at rest; then each count timed `--repeats` times, over every queue and for one, next to
the single `GROUP BY status` scan it replaced (run as a plain statement, for reference).

    python benchmarks/counts.py [--finished 1000000] [--pending 100] [--repeats 7] [--dsn URL]

Set-up: `--dsn`, else `DATABASE_URL`, else the embedded PostgreSQL in a temporary data
directory; a dedicated database is created and dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import asyncpg
from _server import on_a_server, throw_away_database

from starlette_jobs import Jobs

FILL = """
INSERT INTO starlette_jobs (name, queue, payload, status, attempts, max_attempts, started_at,
                            finished_at)
SELECT 'bench.count', 'q' || (i % 4), jsonb_build_object('n', i),
       CASE WHEN i % 50 = 0 THEN 'failed' ELSE 'succeeded' END, 1, 1, now(), now()
  FROM generate_series(1, $1::int) AS i
"""
PENDING = """
INSERT INTO starlette_jobs (name, queue, payload, max_attempts)
SELECT 'bench.count', 'q1', jsonb_build_object('n', i), 1 FROM generate_series(1, $1::int) AS i
"""
# What count_by_status ran before: one scan of the table, grouped.
GROUPED = """
SELECT status, count(*) AS jobs FROM starlette_jobs
 WHERE $1::text IS NULL OR queue = $1
 GROUP BY status
"""


async def _median_ms(call: Callable[[], Awaitable[Any]], repeats: int) -> float:
    await call()  # the first one plans and warms the cache
    times = []
    for _ in range(repeats):
        before = time.perf_counter()
        await call()
        times.append(time.perf_counter() - before)
    return statistics.median(times) * 1000


async def measure(server: str, finished: int, pending: int, repeats: int) -> None:
    async with throw_away_database(server, "starlette_jobs_counts") as database:
        async with Jobs(database, queues={}):  # migrates it
            pass
        connection: asyncpg.Connection[Any] = await asyncpg.connect(database)
        try:
            await connection.execute(FILL, finished)
            await connection.execute(PENDING, pending)
            await connection.execute("VACUUM ANALYZE starlette_jobs")
            async with Jobs(database, queues={}) as jobs:
                for queue in (None, "q1"):
                    ours = await _median_ms(partial(jobs.count_by_status, queue=queue), repeats)
                    grouped = await _median_ms(partial(connection.fetch, GROUPED, queue), repeats)
                    where = "every queue" if queue is None else f"queue {queue!r}"
                    print(
                        f"{finished:,} finished and {pending:,} pending jobs, {where}: "
                        f"count_by_status {ours:.1f} ms, one grouped scan {grouped:.1f} ms "
                        f"(medians of {repeats})",
                        flush=True,
                    )
        finally:
            await connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--finished", type=int, default=1_000_000, help="finished jobs kept")
    parser.add_argument("--pending", type=int, default=100, help="pending jobs")
    parser.add_argument("--repeats", type=int, default=7, help="timed counts of each kind")
    parser.add_argument("--dsn", help="PostgreSQL server URL (default DATABASE_URL, else embedded)")
    args = parser.parse_args()
    dsn = args.dsn or os.environ.get("DATABASE_URL")
    asyncio.run(
        on_a_server(dsn, lambda server: measure(server, args.finished, args.pending, args.repeats))
    )


if __name__ == "__main__":
    main()
