"""The command line's options: `build_parser`, what `starlette-jobs --help` shows. What they do
to the `Jobs` is `_target.jobs_for`'s."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .._config import JobsConfig
from .._count_records import DEFAULT_COUNT_CAP
from .._errors import JobDefinitionError
from .._options import check_queue_name
from .._records import JobStatus
from .._since import SinceError, finished_after
from .._trace_ids import trace_id_filter
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

    _add_target(commands.add_parser("migrate", help="apply schema migrations"), required=False)
    status = commands.add_parser("status", help="count jobs by status")
    _add_target(status, required=False)
    status.add_argument(
        "--queue", type=_queue, metavar="NAME",
        help="count one queue's jobs only (default: every queue)",
    )  # fmt: skip
    status.add_argument(
        "--cap",
        type=_bounded(1, 1_000_000),
        default=DEFAULT_COUNT_CAP,
        metavar="N",
        help="count each finished status up to N, shown N+ past it (default: %(default)s)",
    )
    _add_json(status, "print one JSON object, status to count, and the capped statuses")
    _add_reading_commands(commands)
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
        _add_json(control, "print one JSON object: the queue and whether it is paused now")
    dashboard = commands.add_parser("dashboard", help="serve the operator's dashboard")
    _add_target(dashboard, required=False)
    dashboard.add_argument(
        "--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)"
    )
    dashboard.add_argument(
        "--port", type=_bounded(1, 65535), default=8001, help="the port (default: 8001)"
    )
    dashboard.add_argument(
        "--authorize", metavar="MODULE:FUNCTION",
        help="the hook that allows each action, authorize(request, action, queue) "
        "(docs/dashboard.md; default: none, the dashboard is read-only)",
    )  # fmt: skip
    dashboard.add_argument(
        "--trace-url", metavar="URL",
        help="where a job's trace is shown, {trace_id} in its place, e.g. "
        "https://tempo.example/trace/{trace_id} (default: the trace id, unlinked)",
    )  # fmt: skip
    for name, text in (
        ("retry", "run failed or cancelled jobs again, from their first attempt"),
        ("cancel", "cancel pending jobs; ask running ones to stop"),
        ("release", "hand running jobs back to pending at once (their worker is gone)"),
    ):
        action = commands.add_parser(name, help=text)
        action.add_argument("job_ids", nargs="+", type=_job_id, metavar="JOB_ID", help="a job's id")
        action.add_argument(
            "--by", metavar="NAME",
            help="who asks, written in each job's event (default: the OS user running this)",
        )  # fmt: skip
        _add_target(action, required=False)
        _add_json(action, "print one JSON object per job: its id, the action and its outcome")
    return parser


def _add_reading_commands(commands: Any) -> None:
    listing = commands.add_parser("list", help="list jobs, most recent first")
    _add_target(listing, required=False)
    listing.add_argument(
        "--status",
        choices=[status.value for status in JobStatus],
        help="one status's jobs only (default: any status)",
    )
    listing.add_argument(
        "--queue", type=_queue, metavar="NAME", help="one queue's jobs only (default: any)"
    )
    listing.add_argument(
        "--name", metavar="JOB", help="one job name's only, e.g. app.send_email (default: any)"
    )
    listing.add_argument(
        "--limit", type=_bounded(1, 1000), default=50, metavar="N",
        help="how many at most (1 to 1000; default: 50)",
    )  # fmt: skip
    listing.add_argument(
        "--before", type=_bounded(1, 2**63 - 1), metavar="JOB_ID",
        help="the next page: jobs older than this one, the last id of the page before "
        "(default: the first page)",
    )  # fmt: skip
    listing.add_argument(
        "--trace-id", type=_trace_id, metavar="HEX",
        help="the jobs enqueued in one trace (32 hex digits; default: any)",
    )  # fmt: skip
    listing.add_argument(
        "--correlation-id", metavar="ID",
        help="the jobs enqueued by one request, its x-request-id (default: any)",
    )  # fmt: skip
    listing.add_argument(
        "--since", type=_since, metavar="AGE_OR_TIME",
        help="only jobs that finished at or after this: an age (30m, 1h, 2d) or an ISO 8601 "
        "time, e.g. --status failed --since 1h (default: any time, unfinished jobs too)",
    )  # fmt: skip
    _add_json(listing, "print one JSON object per job")
    for name, text in (
        ("show", "show one job: its fields, result, errors and events"),
        ("events", "show one job's history, oldest first"),
    ):
        one = commands.add_parser(name, help=text)
        one.add_argument("job_id", type=_job_id, metavar="JOB_ID", help="the job's id")
        _add_target(one, required=False)
        _add_json(one, "print JSON (show: one object; events: one object per event)")
    peek = commands.add_parser("peek", help="the jobs the next claim of a queue would take")
    peek.add_argument("queue", type=_queue, metavar="QUEUE", help="the queue's name")
    _add_target(peek, required=False)
    peek.add_argument(
        "--limit", type=_bounded(1, 100), default=10, metavar="N",
        help="how many at most (1 to 100; default: 10)",
    )  # fmt: skip
    _add_json(peek, "print one JSON object per job")


def _add_json(parser: argparse.ArgumentParser, text: str) -> None:
    parser.add_argument("--json", action="store_true", help=f"{text} (default: a table)")


def _since(text: str) -> datetime:
    try:
        return finished_after(text, datetime.now(UTC))
    except SinceError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _bounded(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        # ASCII digits only: int() also reads "١٢" (Arabic-Indic digits) and "1_000".
        digits = text.strip()
        value = int(digits) if digits.isascii() and digits.isdigit() else low - 1
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected a whole number from {low} to {high}")
        return value

    return parse


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


def _trace_id(text: str) -> str:
    try:
        trace_id = trace_id_filter(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    assert trace_id is not None
    return trace_id


_MAX_JOB_ID = 2**63 - 1


def _job_id(text: str) -> str:
    """A job id as given (the outputs echo it), once it is one: a typo is a usage mistake
    (status 2), not a job that is missing (status 3)."""
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= _MAX_JOB_ID):
        raise argparse.ArgumentTypeError(
            f"a job id is a whole number from 1 to {_MAX_JOB_ID}, got {text!r}"
        )
    return text


def _queue(text: str) -> str:
    """A queue name, checked as `Jobs` checks it: a name no queue can have is a usage mistake,
    not a queue with no jobs."""
    try:
        return check_queue_name(text)
    except JobDefinitionError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
