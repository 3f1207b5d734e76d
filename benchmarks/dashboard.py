"""How long each page of the dashboard takes on a large table: a throw-away database filled
with finished jobs (three events each), each page requested in process through the ASGI app
(no network: the dashboard's queries and its rendering), the median and the slowest of
`--repeat` requests.

    python benchmarks/dashboard.py [--jobs 1000000] [--events 3] [--repeat 20] [--dsn URL]
                                   [--keep NAME] [--seed-only]

The jobs are spread over 4 queues and 10 job names; one in 100 failed, the rest succeeded.
Set-up: `--dsn`, else `DATABASE_URL`, else the embedded PostgreSQL in a temporary data
directory; a dedicated database is created and dropped at the end. `--keep NAME` fills the
database NAME instead and keeps it: a later run with the same `--keep` and `--jobs` measures it
again without filling it (10,000,000 jobs take minutes to fill); `--seed-only` fills and stops,
so that only the measuring run needs the machine to itself.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import statistics
import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

import asyncpg
import httpx2
from _server import on_a_server, throw_away_database, with_database

from starlette_jobs import Jobs
from starlette_jobs.dashboard import Dashboard

FILL_JOBS = """
INSERT INTO starlette_jobs (name, queue, payload, status, attempts, max_attempts, created_at,
                            started_at, finished_at, worker_id, last_error, trace_context)
SELECT 'bench.job' || (i % 10), 'q' || (i % 4), jsonb_build_object('n', i),
       CASE WHEN i % 100 = 0 THEN 'failed' ELSE 'succeeded' END, 1, 1, t, t, t, 'bench-worker',
       CASE WHEN i % 100 = 0 THEN 'RuntimeError: bench' END,
       -- every job enqueued in a traced request, five jobs per request (trace, correlation id)
       jsonb_build_object('traceparent', '00-' || md5('trace' || i / 5) || '-'
                          || substr(md5('span' || i), 1, 16) || '-01',
                          'x-request-id', 'req-' || i / 5)
  FROM generate_series(1, $1) AS i,
       LATERAL (SELECT now() - interval '2 hours' + i * interval '1 ms' AS t) AS at
"""
FILL_EVENTS = """
INSERT INTO starlette_jobs_events (job_id, at, kind, status, attempt, worker_id)
SELECT job.id, job.finished_at, kind.kind, kind.status, kind.attempt, 'bench-worker'
  FROM starlette_jobs AS job,
       (VALUES (1, 'enqueued', 'pending', 0), (2, 'claimed', 'running', 1),
               (3, 'succeeded', 'succeeded', 1)) AS kind(n, kind, status, attempt)
 WHERE kind.n <= $1
"""

# The hour of per-minute counts the workers would have written (jobs.throughput, the overview's
# "finished 15 min"), where the table exists: a code older than migration 0015 has none.
FILL_THROUGHPUT = """
INSERT INTO starlette_jobs_throughput (queue, minute, succeeded, failed, retried)
SELECT 'q' || q, date_trunc('minute', now()) - m * interval '1 minute', 74250, 750, 300
  FROM generate_series(0, 3) AS q, generate_series(0, 59) AS m
    ON CONFLICT DO NOTHING
"""


async def fill_throughput(database: str) -> None:
    connection: asyncpg.Connection[Any] = await asyncpg.connect(database)
    try:
        if await connection.fetchval("SELECT to_regclass('starlette_jobs_throughput')"):
            await connection.execute(FILL_THROUGHPUT)
    finally:
        await connection.close()


def _trace_id(job_id: int) -> str:
    """The trace id `FILL_JOBS` gives job `job_id`."""
    return hashlib.md5(f"trace{job_id // 5}".encode()).hexdigest()


async def fill(database: str, jobs: int, events: int) -> None:
    connection: asyncpg.Connection[Any] = await asyncpg.connect(database)
    try:
        await connection.execute(FILL_JOBS, jobs)
        await connection.execute(FILL_EVENTS, events)
        await connection.execute("VACUUM ANALYZE starlette_jobs")
        await connection.execute("VACUUM ANALYZE starlette_jobs_events")
    finally:
        await connection.close()


@contextlib.asynccontextmanager
async def kept_database(server: str, name: str) -> AsyncIterator[tuple[str, bool]]:
    """The DSN of the database `name` on the server, created if missing, never dropped; and
    whether it was created now (so is empty)."""
    admin: asyncpg.Connection[Any] = await asyncpg.connect(server)
    try:
        created = not await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
        if created:
            await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    yield with_database(server, name), created


async def filled_rows(database: str) -> int:
    connection: asyncpg.Connection[Any] = await asyncpg.connect(database)
    try:
        return int(await connection.fetchval("SELECT count(*) FROM starlette_jobs"))
    finally:
        await connection.close()


async def measure(server: str, args: argparse.Namespace) -> None:
    jobs, events = args.jobs, args.events
    database_of: Any = (
        kept_database(server, args.keep)
        if args.keep
        else throw_away_database(server, "starlette_jobs_dashboard")
    )
    async with database_of as chosen:
        database = chosen[0] if args.keep else chosen
        async with Jobs(database, queues={}):  # migrates it
            pass
        present = await filled_rows(database)
        if present not in (0, jobs):
            raise SystemExit(f"{args.keep} holds {present:,} jobs, not {jobs:,}: drop it first")
        if present == 0:
            started = time.perf_counter()
            await fill(database, jobs, events)
            print(f"filled {jobs:,} finished jobs, {events * jobs:,} events in "
                  f"{time.perf_counter() - started:.0f} s", flush=True)  # fmt: skip
        if args.seed_only:
            return
        await fill_throughput(database)
        print(f"{jobs:,} finished jobs, {events * jobs:,} events\n", flush=True)
        pages = {
            "overview (4 queues)": "/",
            "list, first page": "/jobs",
            "list, a later page": f"/jobs?before={jobs // 2}",
            "list, status=failed": "/jobs?status=failed",
            "list, queue=q1": "/jobs?queue=q1",
            "list, name=bench.job3": "/jobs?name=bench.job3",
            # Filters no job matches: a plan that walks the ids would read the whole table.
            "list, status=cancelled (none)": "/jobs?status=cancelled",
            "list, name=none (none)": "/jobs?name=bench.none",
            "job page": f"/jobs/{jobs // 2}",
            # No index serves these (docs/dashboard.md): each page walks at most a window of
            # ids down from the newest (or from `before=`), whether it finds the jobs or not.
            "list, trace_id (newest)": f"/jobs?trace_id={_trace_id(jobs)}",
            "list, trace_id (middle)": f"/jobs?trace_id={_trace_id(jobs // 2)}",
            "list, trace_id (none)": f"/jobs?trace_id={'f' * 32}",
            "list, correlation_id (mid)": f"/jobs?correlation_id=req-{jobs // 2 // 5}",
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
                    for _ in range(args.repeat):
                        before = time.perf_counter()
                        response = await client.get(path)
                        times.append(time.perf_counter() - before)
                        assert response.status_code == 200, (path, response.status_code)
                    print(
                        f"{label:<30} median {statistics.median(times) * 1000:7.1f} ms  "
                        f"slowest {max(times) * 1000:7.1f} ms  ({args.repeat} requests)",
                        flush=True,
                    )
                # An old request's jobs: every page, window after window, until they are shown.
                walk: str | None = pages["list, trace_id (middle)"]
                found, windows, before = 0, 0, time.perf_counter()
                while walk is not None and found < 5:
                    html = (await client.get(walk)).text
                    windows += 1
                    found += html.count('<tr class="job"')
                    older = html.split('rel="next" href="/jobs?', 1)
                    query = None if len(older) == 1 else older[1].split('"', 1)[0]
                    walk = None if query is None else "/jobs?" + query.replace("&amp;", "&")
                # 5 on a table this script filled (a kept one filled before traces: none).
                print(
                    f"{'trace_id (middle), to it':<30} {found} jobs, {windows} pages in "
                    f"{(time.perf_counter() - before) * 1000:7.1f} ms",
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
    parser.add_argument("--events", type=int, default=3, choices=(1, 2, 3), help="per job")
    parser.add_argument("--repeat", type=int, default=20, help="requests per page")
    parser.add_argument("--keep", metavar="NAME", help="fill (once) and keep this database")
    parser.add_argument("--seed-only", action="store_true", help="fill, do not measure")
    parser.add_argument("--dsn", help="PostgreSQL server URL (default DATABASE_URL, else embedded)")
    args = parser.parse_args()
    dsn = args.dsn or os.environ.get("DATABASE_URL")
    asyncio.run(on_a_server(dsn, lambda server: measure(server, args)))


if __name__ == "__main__":
    main()
