"""Scaling out against one PostgreSQL: 1, 2 and 4 worker processes draining no-op jobs.

    python benchmarks/scaling.py [--dsn URL] [--jobs 40000] [--processes 1,2,4]
                                 [--concurrency 10] [--rounds 3]

For each count of worker processes (`_worker.py`, the worker the other benchmarks use: a
`Jobs(dsn, queues={"default": concurrency})` with every other setting at its default), `--jobs`
no-op jobs are enqueued into a paused queue, the processes are started and seen registered
(`jobs.workers()`), and the queue is resumed: all of them start together, from the same backlog.
The run ends when the last job has succeeded. Reported per count, the median over `--rounds`
(the order of the counts alternates round by round, as a shared machine's load drifts):

- jobs/s: `--jobs` / (last job succeeded - resume);
- server CPU per job: utime+stime of the PostgreSQL server's processes, from /proc, before and
  after the run: the postmaster's own and its exited children's (cutime+cstime), and every live
  child's (backends, WAL writer, checkpointer, autovacuum...), less the CPU of this harness's
  own backend (its polls). Not pg_stat_statements: it sees only statements, not the commits,
  the WAL or the vacuum a job costs. A server on another machine is not seen: "n/a";
- workers' CPU per job: utime+stime of the worker processes;
- machine CPU per job: every CPU's busy time from /proc/stat (user, nice, system, irq, softirq,
  steal), with the kernel's part (system, irq, softirq) apart: the server, the workers, the
  harness, the kernel, and anything else that ran meanwhile (run under `flock -x`).

Database: `--dsn`, else `DATABASE_URL`, else the embedded PostgreSQL (the `embedded` extra) in a
temporary directory. A database of its own is created for the run and dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _server import on_a_server, throw_away_database  # noqa: E402
from _worker import noop  # noqa: E402

from starlette_jobs import Jobs  # noqa: E402

CHUNK = 20_000
TICK = os.sysconf("SC_CLK_TCK")
# Jobs not finished yet: both counts are read from small partial indexes.
LEFT = (
    "SELECT (SELECT count(*) FROM starlette_jobs WHERE status = 'pending')"
    " + (SELECT count(*) FROM starlette_jobs WHERE status = 'running')"
)


# -- CPU from /proc ---------------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command's name (field 3 onwards), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def process_cpu(pid: int, *, children: bool = False) -> float:
    """Seconds of CPU (user + system) of `pid`; with `children`, its reaped children's too."""
    fields = _stat(pid)
    if fields is None:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    if children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / TICK


def server_cpu(postmaster: int) -> float:
    """The server's CPU so far: the postmaster with its exited children, and its live ones."""
    total = process_cpu(postmaster, children=True)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None and int(fields[1]) == postmaster:
                total += (int(fields[11]) + int(fields[12])) / TICK
    return total


def machine_cpu() -> tuple[float, float]:
    """Busy seconds of all CPUs so far, and the kernel's part of them (/proc/stat)."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = (
        int(value) / TICK for value in Path("/proc/stat").read_text().split("\n")[0].split()[1:9]
    )
    return user + nice + system + irq + softirq + steal, system + irq + softirq


def postmaster_of(backend: int) -> int | None:
    """The server's postmaster, if the backend `backend` runs on this machine."""
    try:
        command = Path(f"/proc/{backend}/cmdline").read_bytes()
    except OSError:
        return None
    fields = _stat(backend)
    if fields is None or b"postgres" not in command:
        return None
    return int(fields[1])


@dataclass
class Snapshot:
    at: float
    server: float
    workers: float
    machine: float
    kernel: float
    harness_backend: float


# -- one run ----------------------------------------------------------------------------------


class Bench:
    def __init__(self, args: argparse.Namespace, dsn: str) -> None:
        self.args = args
        self.dsn = dsn
        self.jobs = Jobs(dsn, queues={})
        self.conn: asyncpg.Connection[Any] | None = None
        self.backend = 0
        self.postmaster: int | None = None

    async def __aenter__(self) -> Bench:
        await self.jobs.__aenter__()  # migrates the database
        self.conn = await asyncpg.connect(self.dsn)
        self.backend = await self.conn.fetchval("SELECT pg_backend_pid()")
        self.postmaster = postmaster_of(self.backend)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.conn is not None:
            await self.conn.close()
        await self.jobs.__aexit__(None, None, None)

    def snapshot(self, workers: list[asyncio.subprocess.Process]) -> Snapshot:
        machine, kernel = machine_cpu()
        return Snapshot(
            at=time.perf_counter(),
            server=server_cpu(self.postmaster) if self.postmaster else float("nan"),
            workers=sum(process_cpu(worker.pid) for worker in workers),
            machine=machine,
            kernel=kernel,
            harness_backend=process_cpu(self.backend) if self.postmaster else 0.0,
        )

    async def prepare(self) -> None:
        assert self.conn is not None
        await self.conn.execute("TRUNCATE starlette_jobs, starlette_jobs_events")
        await self.jobs.pause("default")
        for start in range(0, self.args.jobs, CHUNK):
            items = [{"n": i} for i in range(start, min(start + CHUNK, self.args.jobs))]
            await self.jobs.enqueue_many(noop, items)
        await self.conn.execute("VACUUM ANALYZE starlette_jobs")
        with contextlib.suppress(asyncpg.PostgresError):  # not a superuser: a little noisier
            await self.conn.execute("CHECKPOINT")

    async def run(self, processes: int) -> dict[str, float]:
        assert self.conn is not None
        await self.prepare()
        command = [str(HERE / "_worker.py"), "sj", self.dsn, str(self.args.concurrency)]
        workers = [
            await asyncio.create_subprocess_exec(sys.executable, *command) for _ in range(processes)
        ]
        try:
            deadline = time.monotonic() + self.args.run_timeout
            pids = {worker.pid for worker in workers}
            while {worker.pid for worker in await self.jobs.workers()} != pids:
                if time.monotonic() > deadline or any(w.returncode is not None for w in workers):
                    raise RuntimeError("the worker processes did not all start")
                await asyncio.sleep(0.1)
            before = self.snapshot(workers)
            await self.jobs.resume("default")
            while await self.conn.fetchval(LEFT):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"drain not done after {self.args.run_timeout} s")
                await asyncio.sleep(0.05)
            after = self.snapshot(workers)
        finally:
            for worker in workers:
                worker.terminate()
            for worker in workers:
                try:
                    await asyncio.wait_for(worker.wait(), 30)
                except TimeoutError:
                    worker.kill()
                    await worker.wait()
        succeeded = await self.conn.fetchval(
            "SELECT count(*) FROM starlette_jobs WHERE status = 'succeeded'"
        )
        if succeeded != self.args.jobs:
            raise RuntimeError(f"{succeeded} of {self.args.jobs} jobs succeeded")
        n = self.args.jobs
        seconds = after.at - before.at
        server = (after.server - before.server) - (after.harness_backend - before.harness_backend)
        return {
            "rate": n / seconds,
            "server_us": server / n * 1e6,
            "server_cores": server / seconds,
            "workers_us": (after.workers - before.workers) / n * 1e6,
            "machine_us": (after.machine - before.machine) / n * 1e6,
            "kernel_us": (after.kernel - before.kernel) / n * 1e6,
        }


async def run(args: argparse.Namespace, server_dsn: str) -> None:
    counts = [int(count) for count in args.processes.split(",")]
    results: dict[int, list[dict[str, float]]] = {count: [] for count in counts}
    async with (
        throw_away_database(server_dsn, "sjscaling") as dsn,
        Bench(args, dsn) as bench,
    ):
        admin = await asyncpg.connect(dsn)
        try:
            version = await admin.fetchval("SHOW server_version")
        finally:
            await admin.close()
        for r in range(args.rounds):
            for processes in counts if r % 2 == 0 else counts[::-1]:
                result = await bench.run(processes)
                results[processes].append(result)
                print(
                    f"round {r + 1}, {processes} process(es): {result['rate']:,.0f} jobs/s, "
                    f"server {result['server_us']:.0f} µs/job",
                    flush=True,
                )
        seen = bench.postmaster is not None
    print()
    print(
        "| worker processes | jobs/s | server CPU µs/job | server cores busy "
        "| workers' CPU µs/job | machine CPU µs/job (kernel) |"
    )
    print("|---|---|---|---|---|---|")
    for processes, runs in results.items():
        m = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        server = f"{m['server_us']:.0f}" if seen else "n/a"
        cores = f"{m['server_cores']:.2f}" if seen else "n/a"
        print(
            f"| {processes} | {m['rate']:,.0f} | {server} | {cores} | {m['workers_us']:.0f} "
            f"| {m['machine_us']:.0f} ({m['kernel_us']:.0f}) |"
        )
    print(
        f"\nPostgreSQL {version}; jobs={args.jobs:,} concurrency={args.concurrency} per process; "
        f"rounds={args.rounds} (medians); cpus={os.cpu_count()}; "
        f"load average before/after: {LOAD_BEFORE} / {os.getloadavg()}"
    )


LOAD_BEFORE = os.getloadavg()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--jobs", type=int, default=40_000)
    parser.add_argument("--processes", default="1,2,4", help="counts of worker processes")
    parser.add_argument("--concurrency", type=int, default=10, help="per worker process")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--run-timeout", type=float, default=300.0)
    args = parser.parse_args()
    asyncio.run(on_a_server(args.dsn, lambda dsn: run(args, dsn)))


if __name__ == "__main__":
    main()
