"""Soak benchmark: does the jobs table, its indexes and a worker's memory stop growing?

Runs steady load for `--minutes` and watches what a long-running deployment would: with
`retention` set, workers delete finished jobs, so after a warm-up the number of rows, the
table's size on disk, its indexes and the worker's memory should all level off. This measures
sizes and memory, not speed: a busy machine does not spoil it as long as the worker keeps up.

    python benchmarks/soak.py [--minutes 10] [--rate 200] [--retention 60] [--concurrency 20]
                              [--dsn URL]

At pace (docs/reliability.md, "Retention at pace" in docs/scaling.md):

    python benchmarks/soak.py --rate 5000 --retention 60 --minutes 10 --concurrency 100

Set-up:
    - Database: `--dsn`, else `DATABASE_URL`, else the embedded PostgreSQL in a temporary data
      directory. A dedicated database is created for the run and dropped at the end.
    - Producer: this script, through the public API (`Jobs(dsn, queues={})` and
      `enqueue_many`), at `--rate` jobs per second, what is due every 0.1 s in batches of up to
      1,000. Jobs are
      no-ops with a ~100-byte payload; 4 % fail once and succeed on their retry, 1 % fail both
      of their 2 attempts and end `failed`, so failed rows are pruned too.
    - Worker: a separate process, `python -m starlette_jobs worker soak:worker_jobs --dsn ...`.
      This file is that module too (its directory goes on PYTHONPATH); the worker's `Jobs`
      takes its retention from $SOAK_RETENTION and its concurrency from $SOAK_CONCURRENCY
      (`--concurrency`), set by the script. Its log is kept in a file
      whose path is printed. At the end it gets SIGTERM and must exit with status 0.

Reading the table, one row a minute (minute 0 is the baseline once the worker has started):
    enqueued   jobs the producer has written so far
    finished   jobs that reached a final status so far (enqueued - backlog; pruned ones count)
    rows       rows in the table now. Workers prune in rounds every lease_duration / 3 =
               10 s (at once again while a round leaves old rows behind), so in steady
               state this wanders between rate * retention and rate * (retention + 10 s),
               by where the sample falls in that cycle
    events     rows in starlette_jobs_events: pruned with their jobs, so they level off too
    pruned/s   jobs deleted per second over the last minute
    backlog    pending + running rows: stays small while the worker keeps up
    heap MB    pg_relation_size('starlette_jobs'): the table's main fork, without indexes,
               TOAST, free-space and visibility maps. It may shrink: vacuum truncates empty
               pages at the end of the table
    index MB   pg_indexes_size('starlette_jobs'): all of its indexes together
    dead       n_dead_tup, and autovac: autovacuum_count, from pg_stat_user_tables
    RSS MB     VmRSS of the worker process, from /proc/PID/status

Verdict: for each of rows, events, heap, indexes and RSS, the largest value in the last third
of the minutes (7 to 10 of 10) is compared with the largest in the middle third (4 to 6). It
"levelled off" when the last third is at most 10 % above the middle third; "GREW" otherwise.
The first third is warm-up (retention not yet reached, autovacuum not yet settled) and is not
judged; the script warns when the run is too short for the middle third to start after warm-up.
The exit status is 1 when something GREW or the worker did not exit cleanly on SIGTERM, else 0.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
from _server import throw_away_database

import starlette_jobs
from starlette_jobs import Jobs, JobStatus, Retry, current_job, job
from starlette_jobs.postgres._embedded import start_embedded_postgres

RETENTION_ENV = "SOAK_RETENTION"
CONCURRENCY_ENV = "SOAK_CONCURRENCY"
HERE = str(Path(__file__).resolve().parent)  # goes on the worker's PYTHONPATH, to import `soak`
# Also on it: the folder this script's starlette_jobs came from, so that the worker runs the same
# code (a checkout's, not whichever copy is installed).
PACKAGE_ROOT = str(Path(starlette_jobs.__file__).resolve().parent.parent)
TABLE = "starlette_jobs"
TICK = 0.1  # seconds between producer batches
MAX_BATCH = 1000  # jobs per enqueue_many call at most
ANALYZE_AFTER = 5.0  # seconds into the run: see produce_and_sample
NOTE = "x" * 100  # the payload's filler
TOLERANCE = 0.10  # how much the last third may exceed the middle third and still be "level"
MIB = 1024 * 1024


# -- the worker's side: imported as `soak` by `python -m starlette_jobs worker soak:worker_jobs` --


@job(name="soak.work", retry=Retry.fixed(max_attempts=2, delay=1.0))
async def soak_work(n: int, note: str, failures: int) -> None:
    """A no-op that fails its first `failures` attempts."""
    running = current_job()
    if running is not None and running.attempt <= failures:
        raise RuntimeError(f"soak job {n}: planned failure on attempt {running.attempt}")


worker_jobs = Jobs(
    queues={"default": int(os.environ.get(CONCURRENCY_ENV, "20"))},
    retention=float(os.environ.get(RETENTION_ENV, "60")),
)
UPKEEP = worker_jobs.config.lease_duration / 3  # seconds between the worker's pruning rounds


def planned_failures(n: int) -> int:
    """0 for 95 % of jobs, 1 (retried, then succeeds) for 4 %, 2 (ends failed) for 1 %."""
    share = n % 100
    return 2 if share == 0 else 1 if share <= 4 else 0


# -- measuring ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sample:
    minute: int
    enqueued: int
    finished: int
    rows: int
    events: int
    backlog: int
    heap_bytes: int
    index_bytes: int
    dead_tuples: int
    autovacuums: int
    rss_bytes: int


COLUMNS = (
    f"{'min':>3} {'enqueued':>9} {'finished':>9} {'rows':>7} {'events':>8} {'pruned/s':>8} "
    f"{'backlog':>7} "
    f"{'heap MB':>8} {'index MB':>8} {'dead':>7} {'autovac':>7} {'RSS MB':>7}"
)


def format_row(s: Sample, previous: Sample | None) -> str:
    pruned = 0.0
    if previous is not None:
        pruned = ((s.enqueued - s.rows) - (previous.enqueued - previous.rows)) / 60
    return (
        f"{s.minute:>3} {s.enqueued:>9} {s.finished:>9} {s.rows:>7} {s.events:>8} "
        f"{pruned:>8.0f} {s.backlog:>7} "
        f"{s.heap_bytes / MIB:>8.2f} {s.index_bytes / MIB:>8.2f} {s.dead_tuples:>7} "
        f"{s.autovacuums:>7} {s.rss_bytes / MIB:>7.1f}"
    )


def megabytes(size: int) -> str:
    return f"{size / MIB:.2f} MB"


def proc_status_bytes(pid: int, field: str) -> int:
    """A `kB` field of /proc/PID/status (VmRSS, VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name == field:
            return int(value.split()[0]) * 1024
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


async def take_sample(
    minute: int, enqueued: int, jobs: Jobs, stats: asyncpg.Connection[Any], worker_pid: int
) -> Sample:
    counts = await jobs.count_by_status()
    backlog = counts[JobStatus.PENDING] + counts[JobStatus.RUNNING]
    row = await stats.fetchrow(
        """
        SELECT pg_relation_size(relid) AS heap, pg_indexes_size(relid) AS indexes,
               n_dead_tup, autovacuum_count
          FROM pg_stat_user_tables WHERE relname = $1
        """,
        TABLE,
    )
    assert row is not None, f"table {TABLE} not found"
    events = await stats.fetchval(f"SELECT count(*) FROM {TABLE}_events")
    return Sample(
        minute=minute,
        enqueued=enqueued,
        finished=enqueued - backlog,
        rows=sum(counts.values()),
        events=events,
        backlog=backlog,
        heap_bytes=row["heap"],
        index_bytes=row["indexes"],
        dead_tuples=row["n_dead_tup"],
        autovacuums=row["autovacuum_count"],
        rss_bytes=proc_status_bytes(worker_pid, "VmRSS"),
    )


# -- the database and the worker process --------------------------------------------------------


def embedded_server_dsn() -> str:
    """Starts the embedded PostgreSQL in a temporary directory, removed at exit."""
    scratch = tempfile.mkdtemp(prefix="starlette-jobs-soak-")
    # Registered first so that it runs last: after the embedded server's own atexit stop.
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    return start_embedded_postgres(Path(scratch) / "pgdata")


class WorkerProcess:
    """`python -m starlette_jobs worker soak:worker_jobs`, its output in `log_path`."""

    def __init__(self, process: asyncio.subprocess.Process, log_path: Path) -> None:
        self.process = process
        self.pid = process.pid
        self.log_path = log_path

    @classmethod
    async def start(
        cls, dsn: str, retention: float, concurrency: int, log_path: Path
    ) -> WorkerProcess:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                filter(None, [HERE, PACKAGE_ROOT, os.environ.get("PYTHONPATH")])
            ),
            RETENTION_ENV: str(retention),
            CONCURRENCY_ENV: str(concurrency),
        }
        command = ["-m", "starlette_jobs", "worker", "soak:worker_jobs", "--dsn", dsn]
        with log_path.open("wb") as log:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                *command,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Its own session: Ctrl-C reaches only this script, which then stops the worker
                # with one SIGTERM (a second signal would make the worker exit at once).
                start_new_session=True,
            )
        return cls(process, log_path)

    def check_alive(self) -> None:
        if self.process.returncode is not None:
            raise RuntimeError(
                f"the worker exited early with status {self.process.returncode}; "
                f"see {self.log_path}"
            )

    async def wait_started(self, timeout: float = 60.0) -> None:
        """Until the worker logs that it started (its imports and LISTEN are done)."""
        async with asyncio.timeout(timeout):
            while "started on queues" not in self.log_path.read_text(errors="replace"):
                self.check_alive()
                await asyncio.sleep(0.2)

    async def stop(self, timeout: float = 30.0) -> tuple[int | None, float]:
        """SIGTERM, then waits; returns the exit status (None: killed after `timeout`) and the
        seconds it took."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            status: int | None = await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
            status = None
        return status, loop.time() - started


# -- the run ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Settings:
    minutes: int
    rate: float
    retention: float
    concurrency: int
    dsn: str | None


def payloads(first: int, count: int) -> Iterator[dict[str, Any]]:
    for n in range(first, first + count):
        yield {"n": n, "note": NOTE, "failures": planned_failures(n)}


async def produce_and_sample(
    settings: Settings,
    jobs: Jobs,
    stats: asyncpg.Connection[Any],
    worker: WorkerProcess,
    on_sample: Callable[[Sample], None],
) -> list[Sample]:
    """Enqueues at the steady rate, catching up after a slow tick, and samples every minute."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    enqueued = 0
    analyzed = False
    samples = [await take_sample(0, 0, jobs, stats, worker.pid)]
    on_sample(samples[-1])
    while len(samples) <= settings.minutes:
        worker.check_alive()
        now = loop.time()
        if not analyzed and now - start >= ANALYZE_AFTER:
            # What autovacuum does within its first minute or two: gives the table statistics.
            # Until then the worker's claims keep the generic plan made while the table was
            # empty, which finds the rows to update by a sequential scan (~70 ms a claim at
            # 200,000 rows): at thousands of jobs per second it falls behind for minutes.
            await stats.execute(f"ANALYZE {TABLE}")
            analyzed = True
        next_minute = len(samples)
        if now - start >= next_minute * 60:
            samples.append(await take_sample(next_minute, enqueued, jobs, stats, worker.pid))
            on_sample(samples[-1])
            continue
        due = int(settings.rate * (now - start)) - enqueued
        while due > 0:
            batch = min(due, MAX_BATCH)
            await jobs.enqueue_many(soak_work, payloads(enqueued, batch))
            enqueued += batch
            due -= batch
        await asyncio.sleep(TICK)
    return samples


def verdict(
    samples: list[Sample], field: str, show: Callable[[int], str]
) -> tuple[bool, str] | None:
    """(levelled off?, explanation) by the rule in the module docstring; None if too short."""
    values = [getattr(s, field) for s in samples if s.minute > 0]
    n = len(values)
    if n < 3:
        return None
    middle, last = values[n // 3 : 2 * n // 3], values[2 * n // 3 :]
    peak_middle, peak_last = max(middle), max(last)
    growth = (peak_last - peak_middle) / peak_middle if peak_middle else 0.0
    level = peak_last <= peak_middle * (1 + TOLERANCE)
    first_minute = n // 3 + 1
    window = f"minutes {first_minute}-{2 * n // 3} -> {2 * n // 3 + 1}-{n}"
    return level, f"{growth:+.1%} ({window}: max {show(peak_middle)} -> {show(peak_last)})"


async def describe_table(stats: asyncpg.Connection[Any]) -> list[str]:
    """What autovacuum did and how large each index is, for investigating growth."""
    table = await stats.fetchrow(
        """
        SELECT n_live_tup, n_dead_tup, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del,
               autovacuum_count, autoanalyze_count, last_autovacuum
          FROM pg_stat_user_tables WHERE relname = $1
        """,
        TABLE,
    )
    assert table is not None
    autovacuum = [
        f"{name}={await stats.fetchval('SELECT current_setting($1)', name)}"
        for name in (
            "autovacuum_naptime",
            "autovacuum_vacuum_threshold",
            "autovacuum_vacuum_scale_factor",
            "autovacuum_vacuum_cost_limit",
        )
    ]
    rest = await stats.fetchval(
        "SELECT pg_total_relation_size($1) - pg_relation_size($1) - pg_indexes_size($1)", TABLE
    )
    lines = [
        "  " + ", ".join(f"{key}={value}" for key, value in table.items()),
        "  autovacuum settings: " + ", ".join(autovacuum),
        f"  TOAST, free-space and visibility maps: {rest / MIB:.2f} MB",
    ]
    for index in await stats.fetch(
        """
        SELECT indexrelname, pg_relation_size(indexrelid) AS size
          FROM pg_stat_user_indexes WHERE relname = $1 ORDER BY indexrelname
        """,
        TABLE,
    ):
        lines.append(f"  index {index['indexrelname']}: {index['size'] / MIB:.2f} MB")
    return lines


async def soak(settings: Settings, server_dsn: str, log_path: Path) -> int:
    async with contextlib.AsyncExitStack() as stack:
        dsn = await stack.enter_async_context(
            throw_away_database(server_dsn, "starlette_jobs_soak")
        )
        jobs = await stack.enter_async_context(Jobs(dsn, queues={}))  # migrates the new database
        stats: asyncpg.Connection[Any] = await asyncpg.connect(dsn)
        stack.push_async_callback(stats.close)

        worker = await WorkerProcess.start(dsn, settings.retention, settings.concurrency, log_path)
        stack.push_async_callback(worker.stop)  # on an error or Ctrl-C; a no-op once stopped
        print(f"worker pid {worker.pid}, log {log_path}", flush=True)
        await worker.wait_started()

        print(f"\n{COLUMNS}", flush=True)
        printed: list[Sample] = []

        def show(sample: Sample) -> None:
            print(format_row(sample, printed[-1] if printed else None), flush=True)
            printed.append(sample)

        samples = await produce_and_sample(settings, jobs, stats, worker, show)
        peak_rss = proc_status_bytes(worker.pid, "VmHWM")
        table_lines = await describe_table(stats)
        status, seconds = await worker.stop()

    last = samples[-1]
    print("\nSummary")
    print(
        f"  {last.enqueued} jobs enqueued in {settings.minutes} min "
        f"({last.enqueued / (settings.minutes * 60):.0f}/s), {last.finished} finished, "
        f"{last.enqueued - last.rows} pruned, {last.rows} rows left ({last.backlog} unfinished)"
    )
    print(
        f"  steady state: {settings.rate * settings.retention:.0f} to "
        f"{settings.rate * (settings.retention + UPKEEP):.0f} rows (rate x retention, plus up "
        f"to {UPKEEP:g} s between pruning rounds), plus the backlog"
    )
    print(f"  worker peak RSS (VmHWM) {peak_rss / MIB:.1f} MB")
    print("\n".join(table_lines))
    ok = status == 0
    if status is None:
        print(f"  worker after SIGTERM: still running after {seconds:.0f} s, killed")
    else:
        print(f"  worker after SIGTERM: exited with status {status} in {seconds:.1f} s")

    print(
        f"\nVerdict (levelled off = the largest value of the last third of the minutes is at "
        f"most {TOLERANCE:.0%} above the largest of the middle third)"
    )
    warm_up = (settings.retention + UPKEEP) / 60 + 2  # then an autovacuum cycle or two
    if settings.minutes // 3 + 1 < warm_up:
        print(
            f"  caution: the middle third starts at minute {settings.minutes // 3 + 1}, before "
            f"the ~{warm_up:.0f} min warm-up; run longer for a meaningful verdict"
        )
    for label, field, show in (
        ("rows", "rows", str),
        ("events", "events", str),
        ("table heap", "heap_bytes", megabytes),
        ("indexes", "index_bytes", megabytes),
        ("worker RSS", "rss_bytes", megabytes),
    ):
        judged = verdict(samples, field, show)
        if judged is None:
            print(f"  {label:<11} too few minutes to judge (3 at least)")
            continue
        level, explanation = judged
        ok = ok and level
        print(f"  {label:<11} {'levelled off' if level else 'GREW'}: {explanation}")
    if last.backlog > settings.rate * 10:
        print(
            f"  note: {last.backlog} jobs unfinished at the end: the worker fell behind, so the "
            "table holds a backlog as well as retained jobs"
        )
    return 0 if ok else 1


def parse_settings(argv: list[str] | None = None) -> Settings:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=int, default=10, help="how long to run (default 10)")
    parser.add_argument("--rate", type=float, default=200, help="jobs per second (default 200)")
    parser.add_argument(
        "--retention", type=float, default=60, help="worker's retention in seconds (default 60)"
    )
    parser.add_argument(
        "--concurrency", type=int, default=20, help="the worker's concurrency (default 20)"
    )
    parser.add_argument("--dsn", help="PostgreSQL server URL (default DATABASE_URL, else embedded)")
    args = parser.parse_args(argv)
    if args.minutes < 1 or args.rate <= 0 or args.retention <= 0 or args.concurrency < 1:
        parser.error("--minutes, --rate, --retention and --concurrency must be positive")
    return Settings(args.minutes, args.rate, args.retention, args.concurrency, args.dsn)


def main() -> int:
    settings = parse_settings()
    server_dsn = settings.dsn or os.environ.get("DATABASE_URL") or embedded_server_dsn()
    log_path = Path(tempfile.gettempdir()) / f"starlette-jobs-soak-worker-{os.getpid()}.log"
    print(
        f"soak: {settings.minutes} min at {settings.rate:g} jobs/s, retention "
        f"{settings.retention:g} s, worker concurrency {settings.concurrency}",
        flush=True,
    )
    try:
        return asyncio.run(soak(settings, server_dsn, log_path))
    except KeyboardInterrupt:
        print("\ninterrupted; the worker was stopped and the database dropped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
