"""What an index for the job list's trace and correlation filters would cost each enqueue, and
what it would save the filter: the question docs/dashboard.md answers.

    PYTHONPATH=. python benchmarks/trace_index.py [--prefill 1000000] [--jobs 2000] [--rounds 5]

A throw-away database is filled with `--prefill` finished jobs, each enqueued in a traced
request (five jobs per trace and correlation id), so that the indexes have the size they would
have. Then, in alternating rounds, with and without the two partial expression indexes a
filter could use (the trace id in the stored traceparent, the correlation id):

    single  `--jobs` enqueues, one awaited `jobs.enqueue` each, each in a traced request
    bulk    one `enqueue_many` of 10 x `--jobs` jobs in one traced request

and `jobs.list(trace_id=...)` / `jobs.list(correlation_id=...)` of a request in the middle of
the table, with and without the indexes. Medians of the rounds; microseconds per job.
Set-up: `--dsn`, else `DATABASE_URL`, else the embedded PostgreSQL in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import statistics
import time
from typing import Any

import asyncpg
from _server import on_a_server, throw_away_database
from _worker import noop
from dashboard import FILL_JOBS
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from starlette_jobs import Jobs
from starlette_jobs._correlation import correlation_scope

INDEXES = (
    """CREATE INDEX bench_jobs_trace_id ON starlette_jobs
           ((substr(trace_context->>'traceparent', 4, 32)))
        WHERE trace_context ? 'traceparent'""",
    """CREATE INDEX bench_jobs_correlation_id ON starlette_jobs
           ((trace_context->>'x-request-id'))
        WHERE trace_context ? 'x-request-id'""",
    # The planner reads no statistics of a partial index's expression: without these, it
    # guesses 0.5% of the table matches and walks the primary key instead.
    """CREATE STATISTICS bench_jobs_trace_stats
           ON (substr(trace_context->>'traceparent', 4, 32)) FROM starlette_jobs""",
    """CREATE STATISTICS bench_jobs_correlation_stats
           ON (trace_context->>'x-request-id') FROM starlette_jobs""",
)
DROP = """
DROP INDEX IF EXISTS bench_jobs_trace_id, bench_jobs_correlation_id;
DROP STATISTICS IF EXISTS bench_jobs_trace_stats, bench_jobs_correlation_stats"""
# What the filter would say, to use the indexes: the same expressions, and the predicates.
INDEXED_TRACE = """
SELECT id FROM starlette_jobs
 WHERE trace_context ? 'traceparent' AND substr(trace_context->>'traceparent', 4, 32) = $1
 ORDER BY id DESC LIMIT 50"""
INDEXED_CORRELATION = """
SELECT id FROM starlette_jobs
 WHERE trace_context ? 'x-request-id' AND trace_context->>'x-request-id' = $1
 ORDER BY id DESC LIMIT 50"""


def request_span(n: int) -> NonRecordingSpan:
    """A traced request's span, as a propagator would hand it in (no SDK: its cost apart)."""
    trace_id = int.from_bytes(hashlib.md5(f"bench{n}".encode()).digest(), "big")
    return NonRecordingSpan(
        SpanContext(trace_id, n + 1, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    )


async def enqueue_single(jobs: int, offset: int) -> float:
    started = time.perf_counter()
    for i in range(jobs):
        with trace.use_span(request_span(offset + i)), correlation_scope(f"bench-{offset + i}"):
            await noop.enqueue(n=i)
    return (time.perf_counter() - started) / jobs


async def enqueue_bulk(jobs: int, offset: int) -> float:
    started = time.perf_counter()
    with trace.use_span(request_span(offset)), correlation_scope(f"bench-{offset}"):
        await noop.enqueue_many([{"n": i} for i in range(jobs)])
    return (time.perf_counter() - started) / jobs


async def filter_times(jobs: Jobs, connection: Any, prefill: int, indexed: bool) -> list[float]:
    middle = prefill // 2
    trace_id = hashlib.md5(f"trace{middle // 5}".encode()).hexdigest()
    correlation = f"req-{middle // 5}"
    times = []
    for _ in range(5):
        started = time.perf_counter()
        if indexed:
            found = await connection.fetch(INDEXED_TRACE, trace_id)
        else:
            found = [r.id for r in await jobs.list(trace_id=trace_id, limit=50)]
        times.append(time.perf_counter() - started)
        assert len(found) == 5, found
    trace_ms = statistics.median(times) * 1000
    times = []
    for _ in range(5):
        started = time.perf_counter()
        if indexed:
            found = await connection.fetch(INDEXED_CORRELATION, correlation)
        else:
            found = [r.id for r in await jobs.list(correlation_id=correlation, limit=50)]
        times.append(time.perf_counter() - started)
        assert len(found) == 5, found
    return [trace_ms, statistics.median(times) * 1000]


async def measure(server: str, prefill: int, jobs: int, rounds: int) -> None:
    async with throw_away_database(server, "starlette_jobs_trace_index") as database:
        async with Jobs(database, queues={}):  # migrates it
            pass
        connection: asyncpg.Connection[Any] = await asyncpg.connect(database)
        try:
            started = time.perf_counter()
            await connection.execute(FILL_JOBS, prefill)
            await connection.execute("VACUUM ANALYZE starlette_jobs")
            print(f"{prefill:,} traced finished jobs ({time.perf_counter() - started:.0f} s)")
            results: dict[str, list[float]] = {}
            async with Jobs(database, queues={}) as producer:
                for indexed in (False, True):
                    if indexed:
                        for statement in INDEXES:
                            await connection.execute(statement)
                        await connection.execute("ANALYZE starlette_jobs")
                    trace_ms, correlation_ms = await filter_times(
                        producer, connection, prefill, indexed
                    )
                    label = "with the indexes" if indexed else "no index (the list's query)"
                    print(f"filter, {label:<28} trace_id {trace_ms:7.1f} ms  "
                          f"correlation_id {correlation_ms:7.1f} ms")  # fmt: skip
                await connection.execute(DROP)
                offset = 0
                for _ in range(rounds):
                    for indexed in (False, True):
                        if indexed:
                            for statement in INDEXES:
                                await connection.execute(statement)
                        key = "indexed" if indexed else "plain"
                        results.setdefault(f"single {key}", []).append(
                            await enqueue_single(jobs, offset)
                        )
                        results.setdefault(f"bulk {key}", []).append(
                            await enqueue_bulk(10 * jobs, offset)
                        )
                        offset += jobs
                        if indexed:
                            await connection.execute(DROP)
            for phase in ("single", "bulk"):
                plain = statistics.median(results[f"{phase} plain"]) * 1e6
                indexed_us = statistics.median(results[f"{phase} indexed"]) * 1e6
                extra = (indexed_us / plain - 1) * 100
                print(f"enqueue {phase:<6} no index {plain:7.1f} us/job  with the indexes "
                      f"{indexed_us:7.1f} us/job  ({extra:+.0f}%)")  # fmt: skip
        finally:
            await connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefill", type=int, default=1_000_000, help="traced jobs to start")
    parser.add_argument("--jobs", type=int, default=2_000, help="single enqueues per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each kind")
    parser.add_argument("--dsn", help="PostgreSQL server URL (default DATABASE_URL, else embedded)")
    args = parser.parse_args()
    dsn = args.dsn or os.environ.get("DATABASE_URL")
    asyncio.run(
        on_a_server(dsn, lambda server: measure(server, args.prefill, args.jobs, args.rounds))
    )


if __name__ == "__main__":
    main()
