"""The commands that change jobs and queues: `retry`, `cancel` and `release` (each of one or
more job ids), `pause` and `resume`. Each says what it did to each job; the exit status is the
worst of them (docs/cli.md): a job the action did not apply to, then a job that does not exist."""

from __future__ import annotations

import argparse
import getpass
import json
from collections.abc import Awaitable, Callable

from .._errors import JobNotFoundError
from .._jobs import Jobs
from ._output import Exit

# What each action says it did to a job, or did not, and why not.
_ACTIONS: dict[str, tuple[str, str, str]] = {
    "retry": (
        "retried",
        "not retried",
        "only a failed or cancelled job is retried (a workflow's step, not before the steps it "
        "waits for that failed)",
    ),
    "cancel": (
        "cancelled, or asked to stop if running",
        "not cancelled",
        "it has finished, or was asked to stop already",
    ),
    "release": ("released back to pending", "not released", "only a running job is released"),
}


async def act_on_jobs(jobs: Jobs, args: argparse.Namespace) -> Exit:
    done, not_done, why_not = _ACTIONS[args.command]
    worst = Exit.OK
    by = args.by or _os_user()
    async with jobs:
        action: Callable[..., Awaitable[bool]] = getattr(jobs, args.command)
        for job_id in args.job_ids:
            try:
                changed = await action(job_id, by=by)
            except JobNotFoundError:
                outcome, code = "not found", Exit.NOT_FOUND
            else:
                outcome, code = ("changed", Exit.OK) if changed else ("unchanged", Exit.UNCHANGED)
            worst = max(worst, code)
            if args.json:
                print(json.dumps({"id": job_id, "action": args.command, "outcome": outcome}))
                continue
            record = None if code is Exit.NOT_FOUND else await jobs.get(job_id)
            now = "" if record is None else f" (now {record.status.value})"
            if code is Exit.OK:
                print(f"job {job_id}: {done}{now}")
            elif code is Exit.UNCHANGED:
                print(f"job {job_id}: {not_done}{now}: {why_not}")
            else:
                print(f"job {job_id}: no such job")
    return worst


def _os_user() -> str | None:
    """Who runs the command, for the audit trail; None where the OS cannot tell (a container
    running as a uid with no name)."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return None


async def pause_or_resume(jobs: Jobs, args: argparse.Namespace) -> Exit:
    pause = args.command == "pause"
    async with jobs:
        await (jobs.pause(args.queue) if pause else jobs.resume(args.queue))
    if args.json:
        print(json.dumps({"queue": args.queue, "action": args.command, "paused": pause}))
    else:
        print(f"queue {args.queue!r} {'paused' if pause else 'resumed'}")
    return Exit.OK
