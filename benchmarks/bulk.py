"""How long a bulk retry takes (docs/dashboard.md, "Bulk actions"): a throw-away database with
`--failed` failed jobs on queue `q1` among `--others` succeeded jobs of other queues; the bulk
retry recorded (`jobs.begin_bulk`: its count), then run batch by batch (`bulk_batch`, what
`jobs.run_bulk` loops over), each batch timed.

    python benchmarks/bulk.py [--failed 10000] [--others 0] [--batch 500] [--dsn URL]

Set-up: `--dsn`, else `DATABASE_URL`, else the embedded PostgreSQL in a temporary data
directory; a dedicated database is created and dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

import asyncpg
from _server import on_a_server, throw_away_database

from starlette_jobs import Jobs

FILL = """
INSERT INTO starlette_jobs (name, queue, payload, status, attempts, max_attempts, started_at,
                            finished_at, last_error)
SELECT 'bench.send', CASE WHEN i <= $1::int THEN 'q1' ELSE 'q' || (2 + i % 3) END,
       jsonb_build_object('n', i), CASE WHEN i <= $1::int THEN 'failed' ELSE 'succeeded' END,
       1, 1, now(), now(), CASE WHEN i <= $1::int THEN 'RuntimeError: bench' END
  FROM generate_series(1, $1::int + $2::int) AS i
"""


async def measure(server: str, failed: int, others: int, batch: int) -> None:
    async with throw_away_database(server, "starlette_jobs_bulk") as database:
        async with Jobs(database, queues={}):  # migrates it
            pass
        connection: asyncpg.Connection[Any] = await asyncpg.connect(database)
        try:
            await connection.execute(FILL, failed, others)
            await connection.execute("VACUUM ANALYZE starlette_jobs")
        finally:
            await connection.close()
        async with Jobs(database, queues={}) as jobs:
            store = jobs._ready_store
            before = time.perf_counter()
            record = await jobs.begin_bulk("retry", queue="q1", status="failed", by="bench")
            began = time.perf_counter() - before
            times = []
            started = time.perf_counter()
            while True:
                before = time.perf_counter()
                after = await store.bulk_batch(record.id, batch)
                times.append(time.perf_counter() - before)
                if after is None or after.finished:
                    break
            total = time.perf_counter() - started
            assert after is not None
            assert after.done == failed, after
        print(
            f"{failed:,} failed among {others:,} others, batches of {batch}: begin (count) "
            f"{began * 1000:.1f} ms; {len(times)} batches in {total * 1000:.0f} ms, median "
            f"{statistics.median(times) * 1000:.1f} ms, slowest {max(times) * 1000:.1f} ms",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--failed", type=int, default=10_000, help="failed jobs to retry")
    parser.add_argument("--others", type=int, default=0, help="succeeded jobs of other queues")
    parser.add_argument("--batch", type=int, default=500, help="jobs per batch")
    parser.add_argument("--dsn", help="PostgreSQL server URL (default DATABASE_URL, else embedded)")
    args = parser.parse_args()
    dsn = args.dsn or os.environ.get("DATABASE_URL")
    asyncio.run(
        on_a_server(dsn, lambda server: measure(server, args.failed, args.others, args.batch))
    )


if __name__ == "__main__":
    main()
