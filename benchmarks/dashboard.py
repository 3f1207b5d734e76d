"""How long each page of the dashboard takes on a large table: a throw-away database filled
with finished jobs (three events each), each page requested in process through the ASGI app
(no network: the dashboard's queries and its rendering), the median and the slowest of
`--repeat` requests.

    python benchmarks/dashboard.py [--jobs 1000000] [--repeat 20] [--dsn URL]

The jobs are spread over 4 queues and 10 job names; one in 100 failed, the rest succeeded.
Set-up: `--dsn`, else `DATABASE_URL`, else the embedded PostgreSQL in a temporary data
directory; a dedicated database is created and dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

import asyncpg
import httpx2
from _server import on_a_server, throw_away_database

from starlette_jobs import Jobs
from starlette_jobs.dashboard import Dashboard

FILL_JOBS = """
INSERT INTO starlette_jobs (name, queue, payload, status, attempts, max_attempts, created_at,
                            started_at, finished_at, worker_id, last_error)
SELECT 'bench.job' || (i % 10), 'q' || (i % 4), jsonb_build_object('n', i),
       CASE WHEN i % 100 = 0 THEN 'failed' ELSE 'succeeded' END, 1, 1, t, t, t, 'bench-worker',
       CASE WHEN i % 100 = 0 THEN 'RuntimeError: bench' END
  FROM generate_series(1, $1) AS i,
       LATERAL (SELECT now() - interval '2 hours' + i * interval '1 ms' AS t) AS at
"""
FILL_EVENTS = """
INSERT INTO starlette_jobs_events (job_id, at, kind, status, attempt, worker_id)
SELECT job.id, job.finished_at, kind.kind, kind.status, kind.attempt, 'bench-worker'
  FROM starlette_jobs AS job,
       (VALUES ('enqueued', 'pending', 0), ('claimed', 'running', 1),
               ('succeeded', 'succeeded', 1)) AS kind(kind, status, attempt)
"""


async def fill(database: str, jobs: int) -> None:
    connection: asyncpg.Connection[Any] = await asyncpg.connect(database)
    try:
        await connection.execute(FILL_JOBS, jobs)
        await connection.execute(FILL_EVENTS)
        await connection.execute("VACUUM ANALYZE starlette_jobs")
        await connection.execute("VACUUM ANALYZE starlette_jobs_events")
    finally:
        await connection.close()


async def measure(server: str, jobs: int, repeat: int) -> None:
    async with throw_away_database(server, "starlette_jobs_dashboard") as database:
        async with Jobs(database, queues={}):  # migrates it
            pass
        started = time.perf_counter()
        await fill(database, jobs)
        print(f"{jobs:,} finished jobs, {3 * jobs:,} events ({time.perf_counter() - started:.0f} s"
              " to fill)\n", flush=True)  # fmt: skip
        pages = {
            "overview (4 queues)": "/",
            "list, first page": "/jobs",
            "list, a later page": f"/jobs?before={jobs // 2}",
            "list, status=failed": "/jobs?status=failed",
            "list, queue=q1": "/jobs?queue=q1",
            "list, name=bench.job3": "/jobs?name=bench.job3",
            "job page": f"/jobs/{jobs // 2}",
            # The time bound (`since=`): every job finished in the last 3 hours, none in the
            # last hour, and the last 1 % of them, failed (a page of them, then the page past
            # the last match: the bound must not walk the rest of the table by id).
            "list, since=3h (all)": "/jobs?since=3h",
            "list, since=1h (none)": "/jobs?since=1h",
            "list, since=3h failed": "/jobs?since=3h&status=failed",
        }
        last = await _finished_at(database, jobs - jobs // 100)
        newest = urlencode({"since": last.isoformat(), "status": "failed"})
        pages["list, last 1 %, failed"] = f"/jobs?{newest}"
        pages["list, past the last 1 %"] = f"/jobs?{newest}&before={jobs - jobs // 100}"
        newest_any = urlencode({"since": last.isoformat()})
        pages["list, last 1 %, any"] = f"/jobs?{newest_any}"
        pages["list, past the last 1 %, any"] = f"/jobs?{newest_any}&before={jobs - jobs // 100}"
        async with Jobs(database, queues={}) as reader:
            dashboard = Dashboard(reader, queues=["q0", "q1", "q2", "q3"])
            transport = httpx2.ASGITransport(app=dashboard)
            async with httpx2.AsyncClient(transport=transport, base_url="http://bench") as client:
                for label, path in pages.items():
                    times = []
                    for _ in range(repeat):
                        before = time.perf_counter()
                        response = await client.get(path)
                        times.append(time.perf_counter() - before)
                        assert response.status_code == 200, (path, response.status_code)
                    print(
                        f"{label:<30} median {statistics.median(times) * 1000:7.1f} ms  "
                        f"slowest {max(times) * 1000:7.1f} ms",
                        flush=True,
                    )


async def _finished_at(database: str, job_id: int) -> datetime:
    connection: asyncpg.Connection[Any] = await asyncpg.connect(database)
    try:
        finished: datetime = await connection.fetchval(
            "SELECT finished_at FROM starlette_jobs WHERE id = $1", job_id
        )
        return finished
    finally:
        await connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000, help="finished jobs in the table")
    parser.add_argument("--repeat", type=int, default=20, help="requests per page")
    parser.add_argument("--dsn", help="PostgreSQL server URL (default DATABASE_URL, else embedded)")
    args = parser.parse_args()
    dsn = args.dsn or os.environ.get("DATABASE_URL")
    asyncio.run(on_a_server(dsn, lambda server: measure(server, args.jobs, args.repeat)))


if __name__ == "__main__":
    main()
