"""What the metrics cost per job: CPU time of a drain and of single enqueues, with and without
an OpenTelemetry SDK's meter provider.

    python benchmarks/metrics.py [--dsn URL] [--jobs 20000] [--single-jobs 5000] [--rounds 3]

In alternating rounds, on the same store:

    off   `Jobs(...)` with no meter provider and none set globally: what every user without an
          SDK runs (each call site asks `Metrics.recording()` and does nothing more)
    on    `Jobs(..., meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]))`:
          every instrument recorded and aggregated (the reader never collects: no exporter's
          cost is counted)

Figures: the worker's CPU time per job over a drain of `--jobs` jobs at concurrency 10 (this
process's `time.process_time`: the in-memory store, so the whole worker is in it; with `--dsn`
the database's share is left out), and the CPU time per awaited `enqueue`. Also the cost of one
`recording()` call without an SDK, the check each call site makes.

`--modes off` measures only the first, also on code from before the metrics (`PYTHONPATH`).

Store: `--dsn` (PostgreSQL, a scratch database is not created: use an empty one), else the
in-memory store, which leaves only the library's own CPU time.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import timeit
from typing import Any

from starlette_jobs import Jobs, job


@job(name="bench.metrics.noop", queue="bench")
async def noop(n: int) -> None:
    pass


def meter_provider() -> Any:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    return MeterProvider(metric_readers=[InMemoryMetricReader()])


def make_jobs(dsn: str, mode: str, queues: dict[str, int]) -> Jobs:
    if mode == "on":
        return Jobs(dsn, queues=queues, batch_size=100, meter_provider=meter_provider())
    return Jobs(dsn, queues=queues, batch_size=100)


async def drain_cpu(dsn: str, mode: str, count: int) -> float:
    """CPU µs per job of a drain of `count` jobs."""
    async with make_jobs(dsn, mode, {"bench": 10}) as jobs:
        for start in range(0, count, 1000):
            await noop.enqueue_many([{"n": i} for i in range(start, min(count, start + 1000))])
        began = time.process_time()
        await jobs.drain(timeout=600)
        return (time.process_time() - began) / count * 1e6


async def enqueue_cpu(dsn: str, mode: str, count: int) -> float:
    """CPU µs per awaited single enqueue."""
    async with make_jobs(dsn, mode, {}) as jobs:
        await jobs.enqueue(noop, n=-1)  # the statement prepared
        began = time.process_time()
        for i in range(count):
            await jobs.enqueue(noop, n=i)
        return (time.process_time() - began) / count * 1e6


async def run(args: argparse.Namespace) -> None:
    dsn = args.dsn or "memory://"
    drained: dict[str, list[float]] = {"off": [], "on": []}
    enqueued: dict[str, list[float]] = {"off": [], "on": []}
    modes = args.modes.split(",")
    for r in range(args.rounds):
        for mode in modes if r % 2 == 0 else modes[::-1]:
            drained[mode].append(await drain_cpu(dsn, mode, args.jobs))
            enqueued[mode].append(await enqueue_cpu(dsn, mode, args.single_jobs))
    store = "PostgreSQL" if args.dsn else "the in-memory store"
    print(f"store: {store}; jobs={args.jobs:,} single_jobs={args.single_jobs:,}")
    for label, figures in (("drain, worker CPU", drained), ("single enqueue CPU", enqueued)):
        if modes == ["off"]:
            print(f"{label} per job: {statistics.median(figures['off']):.1f} µs {figures['off']}")
            continue
        off, on = statistics.median(figures["off"]), statistics.median(figures["on"])
        print(
            f"{label} per job: {off:.1f} µs without an SDK, {on:.1f} µs with one "
            f"({on - off:+.1f} µs, {on / off - 1:+.0%}); rounds off {figures['off']} "
            f"on {figures['on']}"
        )
    if "on" in modes:
        from starlette_jobs._metrics import Metrics

        calls = 1_000_000
        per_check = timeit.timeit(Metrics().recording, number=calls) / calls * 1e9
        print(f"Metrics.recording() without an SDK: {per_check:.0f} ns per call")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default=None)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--single-jobs", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--modes", default="off,on", help="off only: runs on a checkout without metrics too"
    )
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
