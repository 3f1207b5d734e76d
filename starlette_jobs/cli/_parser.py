"""The command line's options: `build_parser`, what `starlette-jobs --help` shows. What they do
to the `Jobs` is `_target.jobs_for`'s."""

from __future__ import annotations

import argparse
import math

from .._config import JobsConfig
from .._version import __version__
from ..worker._settings import DEFAULT_RETRY_WAIT


def build_parser() -> argparse.ArgumentParser:
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


def _seconds(text: str) -> float:
    """A number of seconds >= 0 from the command line (`inf` allowed, `nan` not)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if math.isnan(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return value
