"""The cost of a global limit: the shared bench's drain of a queue limited to `--global-limit` jobs
running at once (default 10, the worker's concurrency) against the same queue without a limit,
in one run, in alternating rounds (a shared machine's load drifts between runs minutes apart).

    python benchmarks/limits.py --db postgresql://user@host:port/bench_limits \\
        [--jobs 20000] [--repeats 3] [--global-limit 10] [--concurrency 10]

It reuses the shared bench's harness and its starlette-jobs adapter unchanged
(`peerbench_common.py`, `bench_starlette_jobs.py`, from `$PEERBENCH_DIR`, default
/work/shared/bench): the same producer, the same no-op job, the same drain phase (one worker
process, 20,000 bulk-enqueued jobs, jobs/s from the first job's start to the last one finished).
The only difference between the two variants is the worker's queue: `{"default": concurrency}`
or `{"default": Queue(concurrency=concurrency, global_limit=N)}`. Like the shared bench, `--db`
must name a dedicated database: it is dropped and created again before every round.

Prints each round as it goes, one `RESULT {json}` line at the end, and a table of the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import statistics
import sys
from typing import Any

# The shared bench is not a package: its modules are found on its folder.
sys.path.insert(0, os.environ.get("PEERBENCH_DIR", "/work/shared/bench"))

import bench_starlette_jobs as shared
import peerbench_common as pc

from starlette_jobs import Jobs, Queue


class LimitedBench(shared.Bench):  # type: ignore[misc]
    """The shared adapter, its worker started with `--global-limit N` (0: no limit)."""

    def __init__(self, args: argparse.Namespace, global_limit: int) -> None:
        super().__init__(args)
        self.global_limit = global_limit
        self.name = (
            f"starlette-jobs-global-limit-{global_limit}"
            if global_limit
            else ("starlette-jobs-no-limit")
        )

    def settings(self, args: argparse.Namespace) -> dict[str, Any]:
        settings: dict[str, Any] = super().settings(args)
        if self.global_limit:
            settings["worker"] = (
                "Jobs(queues={'default': Queue(concurrency=concurrency, "
                f"global_limit={self.global_limit})}}) in `async with`"
            )
        return settings

    def worker_argv(self, args: argparse.Namespace) -> list[str]:
        argv: list[str] = super().worker_argv(args)
        return [*argv, "--global-limit", str(self.global_limit)]


async def worker_main(args: argparse.Namespace) -> None:
    """The worker process: the shared adapter's, with the queue limited when asked."""
    queue: int | Queue = args.concurrency
    if args.global_limit:
        queue = Queue(concurrency=args.concurrency, global_limit=args.global_limit)
    async with Jobs(args.db, queues={"default": queue}, **shared._options(args)):
        await asyncio.Event().wait()


def main() -> None:
    parser = pc.build_parser(__doc__)
    shared._hook(parser)
    parser.add_argument(
        "--global-limit", type=int, default=10, help="the limited variant's global limit"
    )
    args = parser.parse_args()
    if not args.db:
        parser.error("--db (or PEERBENCH_DB) is required")
    if args.role == pc.ROLE_WORKER:
        pc.install_hard_timeout(args.timeout, "worker")
        asyncio.run(worker_main(args))
        return
    pc.install_hard_timeout(args.timeout, "bench")
    script = os.path.abspath(sys.argv[0])
    drains: dict[int, list[float]] = {0: [], args.global_limit: []}
    for round_ in range(args.repeats):
        for limit in drains:  # no limit first, then the limit: alternating, round by round
            one = copy.copy(args)
            one.repeats, one.phases = 1, "drain"
            one.label = f"{LimitedBench(args, limit).name}-{round_}"
            result = asyncio.run(pc.run_suite(LimitedBench(one, limit), one, script))
            drains[limit].append(result["drain"]["median"])
            for note in result["notes"]:
                pc.log(f"note: {note}")
    medians = {limit: statistics.median(rates) for limit, rates in drains.items()}
    unlimited, limited = medians[0], medians[args.global_limit]
    print(
        "RESULT "
        + repr(
            {
                "jobs": args.jobs,
                "concurrency": args.concurrency,
                "global_limit": args.global_limit,
                "drain_no_limit": drains[0],
                "drain_global_limit": drains[args.global_limit],
            }
        ),
        flush=True,
    )
    print(f"\n| queue | drain, jobs/s (median of {args.repeats}) | runs |")
    print("| --- | --- | --- |")
    for limit, rates in drains.items():
        name = f"global_limit={limit}" if limit else "no limit"
        runs = ", ".join(f"{rate:,.0f}" for rate in rates)
        print(f"| {name} | {medians[limit]:,.0f} | {runs} |")
    print(f"\nlimited / unlimited: {limited / unlimited:.2f}")


if __name__ == "__main__":
    main()
