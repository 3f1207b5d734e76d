"""Client CPU time per enqueue: where the library's time goes beyond the raw-SQL limit.

    python benchmarks/enqueue_cpu.py [--dsn URL] [--jobs 3000] [--rounds 5]

A single enqueue waits for PostgreSQL, so its rate is the round trip plus the client's own CPU
time; the round trip is the same for everyone, the CPU time is what the library adds. Measured
with `time.process_time` (this process only), which a shared machine's load barely moves, in
alternating rounds of:

    raw        `_reference.enqueue_one`: one INSERT on a plain asyncpg connection
    statement  the library's own INSERT, on a plain asyncpg connection
    lane       the same INSERT through the store's producer lane (its watchdog and fallback)
    enqueue    `jobs.enqueue(noop, n=i)`: validation, serialization, tracing, the lane

Database: `--dsn`, else `DATABASE_URL`, else the embedded PostgreSQL in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _reference
from _worker import noop

from starlette_jobs import Jobs
from starlette_jobs.postgres._migrations import queries
from starlette_jobs.postgres._store import PostgresStore


async def measure(dsn: str, jobs_count: int, rounds: int) -> dict[str, float]:
    async with Jobs(dsn, queues={}) as jobs:
        plain = await asyncpg.connect(dsn)
        try:
            await _reference.setup(plain)
            store = jobs._ready_store
            assert isinstance(store, PostgresStore)
            lane = store._producer
            insert = queries()["insert_job_now"]

            async def raw(n: int) -> None:
                await _reference.enqueue_one(plain, {"n": n})

            async def statement(n: int) -> None:
                await plain.fetchval(insert, "noop", "default", json.dumps({"n": n}), 0, 1, None)

            async def through_lane(n: int) -> None:
                await lane.fetchval(insert, "noop", "default", json.dumps({"n": n}), 0, 1, None)

            async def enqueue(n: int) -> None:
                await jobs.enqueue(noop, n=n)

            ways: dict[str, Callable[[int], Awaitable[None]]] = {
                "raw": raw,
                "statement": statement,
                "lane": through_lane,
                "enqueue": enqueue,
            }
            spent: dict[str, list[float]] = {name: [] for name in ways}
            for _ in range(rounds):
                for name, way in ways.items():
                    started = time.process_time()
                    for n in range(jobs_count):
                        await way(n)
                    spent[name].append((time.process_time() - started) / jobs_count * 1e6)
        finally:
            await plain.close()
    return {name: statistics.median(values) for name, values in spent.items()}


async def run(args: argparse.Namespace) -> None:
    if args.dsn:
        figures = await measure(args.dsn, args.jobs, args.rounds)
    else:
        with tempfile.TemporaryDirectory() as data_dir:
            async with Jobs(queues={}, embedded_data_dir=data_dir) as embedded:
                assert embedded.dsn is not None
                figures = await measure(embedded.dsn, args.jobs, args.rounds)
    print(f"client CPU per enqueue, median of {args.rounds} rounds of {args.jobs}:")
    for name, micros in figures.items():
        print(f"  {name:<10} {micros:6.1f} us   +{micros - figures['raw']:5.1f} us over raw")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--jobs", type=int, default=3_000)
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
