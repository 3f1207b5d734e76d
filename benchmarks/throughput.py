"""starlette-jobs performance harness: throughput, latency, CPU per job, memory, tracing cost.

    python benchmarks/throughput.py [--dsn URL] [--quick] [--jobs 20000] [--phases ...]

Every figure is taken side by side with a hand-written raw-asyncpg queue (`_reference.py`, the
floor cost in Python), in alternating rounds on the same database, and printed as a table with
the ratio and the goal of each figure. Rounds alternate because a shared machine's load drifts:
a ratio of figures taken minutes apart says more about the drift than about the code.

Database: `--dsn`, else `DATABASE_URL`, else the embedded PostgreSQL (the `embedded` extra) in a
temporary directory. A database of its own is created for the run and dropped at the end.

Phases (`--phases`, comma-separated; default all):
    single   one awaited `jobs.enqueue(noop, n=i)` per job, no worker running
    bulk     one `jobs.enqueue_many(noop, [...])` of `--jobs` jobs
    drain    `--jobs` pending jobs, then a worker process at concurrency 10, then 100:
             jobs/s from the first claim to the last outcome, and the worker's CPU per job
    latency  an idle worker; `--latency-jobs` jobs enqueued 10 ms apart; enqueue -> start
    memory   the worker's RSS over a drain of `--memory-jobs` jobs (starlette-jobs only)
    sdk      enqueue and drain again with the OpenTelemetry SDK, spans batched then dropped
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _reference  # noqa: E402
from _server import on_a_server  # noqa: E402
from _worker import noop, sdk_tracer_provider  # noqa: E402

from starlette_jobs import Jobs  # noqa: E402

SJ_COUNTS = (
    "SELECT count(*) FILTER (WHERE status <> 'pending'), "
    "count(*) FILTER (WHERE status = 'succeeded') FROM starlette_jobs"
)
RAW_COUNTS = (
    "SELECT count(*) FILTER (WHERE status <> 'pending'), "
    "count(*) FILTER (WHERE status = 'done') FROM rawq_jobs"
)
CHUNK = 20_000


def with_database(dsn: str, name: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + name))


class WorkerProcess:
    """A `_worker.py` child; its CPU time and RSS read from /proc (Linux)."""

    def __init__(self, kind: str, dsn: str, concurrency: int, **env: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "_worker.py"), kind, dsn, str(concurrency)],
            env={**os.environ, **env},
        )

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Harness:
    def __init__(self, args: argparse.Namespace, dsn: str) -> None:
        self.args = args
        self.dsn = dsn
        self.jobs = Jobs(dsn, queues={})
        self.raw: asyncpg.Connection[Any] | None = None

    async def __aenter__(self) -> Harness:
        await self.jobs.__aenter__()
        self.raw = await asyncpg.connect(self.dsn)
        await _reference.setup(self.raw)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.raw is not None:
            await self.raw.close()
        await self.jobs.__aexit__(None, None, None)

    @property
    def conn(self) -> asyncpg.Connection[Any]:
        assert self.raw is not None
        return self.raw

    async def reset(self) -> None:
        await self.conn.execute("TRUNCATE starlette_jobs, rawq_jobs")
        # Not a superuser: no CHECKPOINT, and the run is a little noisier.
        with contextlib.suppress(asyncpg.PostgresError):
            await self.conn.execute("CHECKPOINT")

    # -- producers ------------------------------------------------------------------------------

    async def enqueue_one(self, kind: str, **arguments: Any) -> None:
        if kind == "sj":
            await self.jobs.enqueue(noop, **arguments)
        else:
            await _reference.enqueue_one(self.conn, arguments)

    async def enqueue_many(self, kind: str, count: int) -> None:
        for start in range(0, count, CHUNK):
            items = [{"n": i} for i in range(start, min(start + CHUNK, count))]
            if kind == "sj":
                await self.jobs.enqueue_many(noop, items)
            else:
                await _reference.enqueue_many(self.conn, items)

    # -- phases ---------------------------------------------------------------------------------

    async def alternate(
        self, rounds: int, run: Callable[[str], Awaitable[float]]
    ) -> dict[str, float]:
        """Seconds per library, summed over rounds that alternate which library goes first."""
        spent = {"sj": 0.0, "raw": 0.0}
        for r in range(rounds):
            for kind in ("sj", "raw") if r % 2 == 0 else ("raw", "sj"):
                await self.reset()
                spent[kind] += await run(kind)
        return spent

    async def single(self) -> dict[str, float]:
        per_round = self.args.single_jobs // self.args.rounds

        async def run(kind: str) -> float:
            await self.enqueue_one(kind, n=-1)  # connections and statements warm
            start = time.perf_counter()
            for i in range(per_round):
                await self.enqueue_one(kind, n=i)
            return time.perf_counter() - start

        spent = await self.alternate(self.args.rounds, run)
        return {k: per_round * self.args.rounds / v for k, v in spent.items()}

    async def bulk(self) -> dict[str, float]:
        n = self.args.jobs

        async def run(kind: str) -> float:
            items = [{"n": i} for i in range(n)]
            start = time.perf_counter()
            if kind == "sj":
                await self.jobs.enqueue_many(noop, items)
            else:
                await _reference.enqueue_many(self.conn, items)
            return time.perf_counter() - start

        spent = await self.alternate(self.args.rounds, run)
        return {k: n * self.args.rounds / v for k, v in spent.items()}

    async def drain_once(
        self, kind: str, concurrency: int, n: int, env: dict[str, str] | None = None
    ) -> dict[str, float]:
        """Drains `n` pending jobs with a fresh worker process: rate, CPU, RSS."""
        await self.reset()
        await self.enqueue_many(kind, n)
        await self.conn.execute("ANALYZE")
        counts = SJ_COUNTS if kind == "sj" else RAW_COUNTS
        worker = WorkerProcess(kind, self.dsn, concurrency, **(env or {}))
        try:
            first = cpu0 = rss0 = 0.0
            peak = 0.0
            deadline = time.monotonic() + self.args.run_timeout
            while True:
                started, done = await self.conn.fetchrow(counts)
                now = time.perf_counter()
                if not first and started:
                    first, cpu0, rss0 = now, worker.cpu_seconds(), worker.rss_mb()
                if first:
                    peak = max(peak, worker.rss_mb())
                if done >= n:
                    cpu1 = worker.cpu_seconds()
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{kind} drain: {done}/{n} after {self.args.run_timeout}s")
                await asyncio.sleep(0.02)
            await asyncio.sleep(1.0)  # idle: what the worker keeps once the work is done
            rss_end = worker.rss_mb()
        finally:
            worker.stop()
        return {
            "rate": n / (now - first),
            "cpu_us": (cpu1 - cpu0) / n * 1e6,
            "rss_start": rss0,
            "rss_peak": peak,
            "rss_end": rss_end,
        }

    async def drain(self, concurrency: int) -> dict[str, dict[str, float]]:
        runs: dict[str, list[dict[str, float]]] = {"sj": [], "raw": []}
        for r in range(self.args.drain_rounds):
            for kind in ("sj", "raw") if r % 2 == 0 else ("raw", "sj"):
                runs[kind].append(await self.drain_once(kind, concurrency, self.args.jobs))
        return {
            kind: {key: statistics.median(run[key] for run in done) for key in done[0]}
            for kind, done in runs.items()
        }

    async def latency(self, kind: str) -> tuple[float, float]:
        await self.reset()
        with tempfile.NamedTemporaryFile("r", suffix=".lat") as file:
            worker = WorkerProcess(kind, self.dsn, 10, BENCH_LATENCY_FILE=file.name)
            try:
                await self.enqueue_one(kind, n=-1, t0=time.time())  # proves the worker is up
                await wait_for_lines(file.name, 1, self.args.run_timeout)
                Path(file.name).write_text("")  # noqa: ASYNC240 (a tiny local file)
                await asyncio.sleep(1.0)
                for i in range(self.args.latency_jobs):
                    await self.enqueue_one(kind, n=i, t0=time.time())
                    await asyncio.sleep(0.010)
                lines = await wait_for_lines(
                    file.name, self.args.latency_jobs, self.args.run_timeout
                )
            finally:
                worker.stop()
        latencies = sorted(
            (float(start) - float(t0)) * 1000 for t0, start in (line.split() for line in lines)
        )
        return percentile(latencies, 50), percentile(latencies, 99)

    async def sdk_single(self) -> dict[str, float]:
        """Enqueue 1-by-1 without and with the SDK (spans batched, then dropped)."""
        traced = Jobs(self.dsn, queues={}, migrate=False, tracer_provider=sdk_tracer_provider())
        await traced.__aenter__()
        try:
            per_round = self.args.single_jobs // self.args.rounds
            spent = {"off": 0.0, "on": 0.0}
            for r in range(self.args.rounds):
                for mode in ("off", "on") if r % 2 == 0 else ("on", "off"):
                    jobs = traced if mode == "on" else self.jobs
                    await self.reset()
                    await jobs.enqueue(noop, n=-1)
                    start = time.perf_counter()
                    for i in range(per_round):
                        await jobs.enqueue(noop, n=i)
                    spent[mode] += time.perf_counter() - start
        finally:
            await traced.__aexit__(None, None, None)
        return {k: per_round * self.args.rounds / v for k, v in spent.items()}


async def wait_for_lines(path: str, count: int, timeout: float) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        lines = Path(path).read_text().splitlines()  # noqa: ASYNC240 (a tiny local file)
        if len(lines) >= count:
            return lines
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(lines)}/{count} jobs started after {timeout}s")
        await asyncio.sleep(0.05)


def percentile(values: list[float], p: float) -> float:
    index = min(len(values) - 1, round(p / 100 * (len(values) - 1)))
    return values[index]


def row(
    figure: str, sj: float, raw: float, goal: str, *, fmt: str = ",.0f", lower: bool = False
) -> str:
    ratio = sj / raw
    limit = float(goal.split()[-1])
    met = ratio <= limit if lower else ratio >= limit
    return (
        f"| {figure} | {sj:{fmt}} | {raw:{fmt}} | {ratio:.2f} | {goal} | "
        f"{'yes' if met else '**no**'} |"
    )


async def run(args: argparse.Namespace, server_dsn: str) -> None:
    name = f"sjbench_{os.getpid()}"
    admin = await asyncpg.connect(with_database(server_dsn, "postgres"))
    await admin.execute(f'CREATE DATABASE "{name}"')
    phases = set(args.phases.split(","))
    lines = [
        "| figure | starlette-jobs | raw asyncpg | ratio | goal | met |",
        "|---|---|---|---|---|---|",
    ]
    notes: list[str] = []
    try:
        async with Harness(args, with_database(server_dsn, name)) as bench:
            if "single" in phases:
                rates = await bench.single()
                lines.append(row("enqueue 1-by-1 (jobs/s)", rates["sj"], rates["raw"], ">= 0.85"))
            if "bulk" in phases:
                rates = await bench.bulk()
                lines.append(row("bulk enqueue (jobs/s)", rates["sj"], rates["raw"], ">= 0.7"))
            if "drain" in phases:
                c10 = await bench.drain(10)
                lines.append(
                    row("drain, c=10 (jobs/s)", c10["sj"]["rate"], c10["raw"]["rate"], ">= 0.75")
                )
                c100 = await bench.drain(100)
                lines.append(
                    row("drain, c=100 (jobs/s)", c100["sj"]["rate"], c100["raw"]["rate"], ">= 0.6")
                )
                lines.append(
                    row(
                        "worker CPU per job, c=10 (µs)",
                        c10["sj"]["cpu_us"],
                        c10["raw"]["cpu_us"],
                        "<= 2",
                        lower=True,
                    )
                )
            if "latency" in phases:
                sj_lat, raw_lat = await bench.latency("sj"), await bench.latency("raw")
                for label, index, goal in (("p50", 0, "<= 1.3"), ("p99", 1, "<= 1.5")):
                    lines.append(
                        row(
                            f"latency {label} (ms)",
                            sj_lat[index],
                            raw_lat[index],
                            goal,
                            fmt=".2f",
                            lower=True,
                        )
                    )
            if "memory" in phases:
                m = await bench.drain_once("sj", 10, args.memory_jobs)
                notes.append(
                    f"memory: worker RSS over a {args.memory_jobs:,}-job drain (c=10): "
                    f"{m['rss_start']:.1f} MB at the first claim, {m['rss_peak']:.1f} MB peak, "
                    f"{m['rss_end']:.1f} MB when idle after it "
                    f"({m['rss_end'] - m['rss_start']:+.1f} MB; goal within 20 MB); "
                    f"{m['rate']:,.0f} jobs/s"
                )
            if "sdk" in phases:
                rates = await bench.sdk_single()
                off = await bench.drain_once("sj", 10, args.jobs)
                on = await bench.drain_once("sj", 10, args.jobs, {"BENCH_OTEL_SDK": "1"})
                notes.append(
                    "OpenTelemetry SDK, spans batched then dropped: enqueue 1-by-1 "
                    f"{rates['on']:,.0f} vs {rates['off']:,.0f} jobs/s without "
                    f"({rates['on'] / rates['off'] - 1:+.0%}); drain c=10 {on['rate']:,.0f} vs "
                    f"{off['rate']:,.0f} jobs/s ({on['rate'] / off['rate'] - 1:+.0%}), worker CPU "
                    f"{on['cpu_us']:.0f} vs {off['cpu_us']:.0f} µs per job"
                )
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    print()
    print("\n".join(lines))
    for note in notes:
        print(f"\n- {note}")
    print(
        f"\nsettings: jobs={args.jobs:,} rounds={args.rounds} drain_rounds={args.drain_rounds} "
        f"single_jobs={args.single_jobs:,} latency_jobs={args.latency_jobs}; "
        f"cpus={os.cpu_count()}; load average before/after: {LOAD_BEFORE} / {os.getloadavg()}"
    )


LOAD_BEFORE = os.getloadavg()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--quick", action="store_true", help="small runs: a smoke test")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--single-jobs", type=int, default=8_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--drain-rounds", type=int, default=2)
    parser.add_argument("--latency-jobs", type=int, default=500)
    parser.add_argument("--memory-jobs", type=int, default=200_000)
    parser.add_argument("--run-timeout", type=float, default=300.0)
    parser.add_argument("--phases", default="single,bulk,drain,latency,memory,sdk")
    args = parser.parse_args()
    if args.quick:
        args.jobs, args.single_jobs, args.rounds, args.drain_rounds = 2_000, 800, 2, 1
        args.latency_jobs, args.memory_jobs = 100, 20_000
    asyncio.run(with_server(args))


async def with_server(args: argparse.Namespace) -> None:
    await on_a_server(args.dsn, lambda dsn: run(args, dsn))


if __name__ == "__main__":
    main()
