"""The commands that read: `status`, `list`, `show`, `events` and `peek`, each as a table for
people or JSON lines for scripts (`--json`)."""

from __future__ import annotations

import argparse
import json

from .._jobs import Jobs
from .._records import JobEvent, JobRecord
from ._output import Exit, one_line, print_fields, print_json_lines, print_table, when

_JOB_COLUMNS = ("ID", "NAME", "QUEUE", "STATUS", "ATTEMPTS", "RUN AT", "LAST ERROR")
_EVENT_COLUMNS = ("AT", "KIND", "STATUS", "ATTEMPT", "WORKER", "BY", "ERROR")


async def status(jobs: Jobs, args: argparse.Namespace) -> Exit:
    async with jobs:
        counts = await jobs.status_counts(queue=args.queue, cap=args.cap)
    if args.json:
        # Each status to a number (the cap for a capped one), and which ones were capped.
        shown: dict[str, object] = {s.value: count for s, count in counts.counts.items()}
        shown["capped"] = sorted(status.value for status in counts.capped)
        print(json.dumps(shown))
        return Exit.OK
    width = max(len(status.value) for status in counts.counts)
    for status_ in counts.counts:
        print(f"{status_.value:<{width}}  {counts.shown(status_)}")
    if counts.capped:
        print(f"(+: {counts.cap:,} or more; finished jobs are counted up to --cap)")
    return Exit.OK


async def list_jobs(jobs: Jobs, args: argparse.Namespace) -> Exit:
    async with jobs:
        found = await jobs.list(
            status=args.status, queue=args.queue, name=args.name, limit=args.limit,
            before=args.before, trace_id=args.trace_id, correlation_id=args.correlation_id,
            finished_after=args.since,
        )  # fmt: skip
    if args.json:
        print_json_lines(job.to_dict() for job in found)
        return Exit.OK
    if not found:
        print("no jobs match")
        return Exit.OK
    print_table(_JOB_COLUMNS, map(_job_row, found))
    if len(found) == args.limit:
        print(f"(the {args.limit} most recent; the next page: --before {found[-1].id})")
    return Exit.OK


async def show(jobs: Jobs, args: argparse.Namespace) -> Exit:
    async with jobs:
        found = await jobs.get(args.job_id)
        events = [] if found is None else await jobs.events(found.id)
    if found is None:
        return _not_found(args.job_id)
    if args.json:
        print(json.dumps({**found.to_dict(), "events": [e.to_dict() for e in events]}, default=str))
        return Exit.OK
    fields = [
        ("id", str(found.id)), ("name", found.name), ("queue", found.queue),
        ("status", found.status.value), ("attempts", f"{found.attempts}/{found.max_attempts}"),
        ("priority", str(found.priority)), ("created", when(found.created_at)),
        ("run at", when(found.run_at)), ("started", when(found.started_at)),
        ("finished", when(found.finished_at)), ("worker", found.worker_id or "-"),
        ("arguments", json.dumps(found.arguments, default=str)),
        ("result", json.dumps(found.result, default=str)),
        ("progress", json.dumps(found.progress, default=str)),
        ("workflow", "-" if found.workflow_id is None else f"{found.workflow_id} ({found.step})"),
        ("last error", found.last_error or "-"),
        ("trace id", found.trace_id or "-"), ("request id", found.correlation_id or "-"),
    ]  # fmt: skip
    print_fields(fields, multi_line={"last error"})  # its traceback, on its own lines
    print()
    print_table(_EVENT_COLUMNS, map(_event_row, events))
    return Exit.OK


async def events(jobs: Jobs, args: argparse.Namespace) -> Exit:
    async with jobs:
        history = await jobs.events(args.job_id)
        missing = not history and await jobs.get(args.job_id) is None
    if missing:
        return _not_found(args.job_id)
    if args.json:
        print_json_lines(event.to_dict() for event in history)
    else:
        print_table(_EVENT_COLUMNS, map(_event_row, history))
    return Exit.OK


async def peek(jobs: Jobs, args: argparse.Namespace) -> Exit:
    async with jobs:
        found = await jobs.peek(args.queue, args.limit)
    if args.json:
        print_json_lines(job.to_dict() for job in found)
    elif not found:
        print(f"no job of queue {args.queue!r} is due")
    else:
        print_table(_JOB_COLUMNS, map(_job_row, found))
    return Exit.OK


def _not_found(job_id: str) -> Exit:
    print(f"starlette-jobs: no job with id {job_id}", flush=True)
    return Exit.NOT_FOUND


def _job_row(job: JobRecord) -> tuple[str, ...]:
    return (
        str(job.id), job.name, job.queue, job.status.value, f"{job.attempts}/{job.max_attempts}",
        when(job.run_at), one_line(job.last_error),
    )  # fmt: skip


def _event_row(event: JobEvent) -> tuple[str, ...]:
    return (
        when(event.at), event.kind.value, event.status.value, str(event.attempt),
        event.worker_id or "-", event.by or "-", one_line(event.error),
    )  # fmt: skip
