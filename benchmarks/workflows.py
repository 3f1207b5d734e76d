"""Workflows against plain jobs (docs/workflows.md, docs/performance.md):

    python benchmarks/workflows.py [--dsn URL] [--steps 10000] [--rounds 3]

- enqueue: one `Workflow` of `--steps` steps and one step waiting for them all (a fan-out and
  its fan-in), against one `enqueue_many` of as many jobs;
- drain: that workflow, against as many independent jobs, each drained by a worker in this
  process at concurrency 100, from the first claim to the last outcome.

Rounds alternate, each on a fresh database of its own, as in throughput.py. Database: `--dsn`,
else `DATABASE_URL`, else the embedded PostgreSQL in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _server import on_a_server, throw_away_database  # noqa: E402

from starlette_jobs import Jobs, Retry, Workflow, job  # noqa: E402


@job(name="benchmarks.part", queue="bench", retry=Retry.none())
async def part(n: int) -> None:
    return None


@job(name="benchmarks.collect", queue="bench", retry=Retry.none())
async def collect() -> None:
    return None


def fan_in(steps: int) -> Workflow:
    flow = Workflow("bench")
    parts = flow.add_many("part", part, [{"n": n} for n in range(steps)])
    flow.after(*parts).add("collect", collect)
    return flow


async def one_round(dsn: str, steps: int, kind: str) -> tuple[float, float]:
    """(seconds to enqueue, seconds to drain) of `kind` ("workflow" or "jobs")."""
    async with Jobs(dsn, queues={}) as producer:  # enqueue first (it migrates), then drain
        started = time.perf_counter()
        if kind == "workflow":
            await fan_in(steps).enqueue(jobs=producer)
        else:
            await producer.enqueue_many(part, [{"n": n} for n in range(steps + 1)])
        enqueued = time.perf_counter() - started
    started = time.perf_counter()
    async with Jobs(dsn, queues={"bench": 100}, batch_size=100, retention=None) as worker:
        await worker.drain(timeout=600)
    drained = time.perf_counter() - started
    return enqueued, drained


async def main(dsn: str | None, steps: int, rounds: int) -> None:
    async def run(server_dsn: str) -> None:
        figures: dict[str, list[tuple[float, float]]] = {"workflow": [], "jobs": []}
        for index in range(rounds):
            for kind in ("jobs", "workflow") if index % 2 else ("workflow", "jobs"):
                async with throw_away_database(server_dsn, f"bench_wf_{kind}") as database:
                    figures[kind].append(await one_round(database, steps, kind))
        wf_enqueue = statistics.median(f[0] for f in figures["workflow"])
        jobs_enqueue = statistics.median(f[0] for f in figures["jobs"])
        wf_drain = statistics.median(f[1] for f in figures["workflow"])
        jobs_drain = statistics.median(f[1] for f in figures["jobs"])
        print(f"| figure ({steps:,} steps -> 1; median of {rounds}) | workflow | jobs | ratio |")
        print("|---|---|---|---|")
        print(f"| enqueue (s) | {wf_enqueue:.3f} | {jobs_enqueue:.3f} | "
              f"{wf_enqueue / jobs_enqueue:.2f} |")  # fmt: skip
        print(f"| drain (s) | {wf_drain:.3f} | {jobs_drain:.3f} | {wf_drain / jobs_drain:.2f} |")

    await on_a_server(dsn, run)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    asyncio.run(main(options.dsn, options.steps, options.rounds))
