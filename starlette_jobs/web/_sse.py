"""A job's status and progress as server-sent events, until it ends: the one module that
imports sse-starlette (the `sse` extra).

The stream does not poll for the job's end: one `jobs.wait` is woken by the database as the
outcome is written. While the job has not ended, the stream looks at it every
`progress_interval` seconds (one `jobs.get`) for a new status or progress, which is written at
most every half second anyway; a pending job that is not due yet, only once it is.

A look sees the job as it is now, not the states it went through since the last one (a retry
0.2 s later runs and fails between two looks). So when the status or attempt changed, the
stream reads the job's history (`jobs.events`, one query, only then) and streams a `status`
for each state it missed, in order; with events off (`Jobs(events=False)`) there is no
history, and only what the looks see is streamed.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import anyio
from starlette.responses import Response

from .._errors import StarletteJobsError
from .._jobs import Jobs
from .._records import EventKind, JobEvent, JobRecord, JobStatus

try:
    from sse_starlette import EventSourceResponse, ServerSentEvent
except ImportError as error:  # pragma: no cover - the extra is part of the dev install
    raise ImportError(
        "the job event stream needs sse-starlette: install `starlette-jobs[sse]`, or pass "
        "`events=False` to job_status_router()"
    ) from error

logger = logging.getLogger("starlette_jobs")


def events_response(
    jobs: Jobs,
    record: JobRecord,
    public: Callable[[JobRecord], Mapping[str, Any]],
    progress_interval: float,
    to_json: Callable[[Any], bytes],
) -> Response:
    """The event stream of the job `record` is a snapshot of."""
    # Set by sse-starlette when the server shuts down: the stream then ends cleanly, rather
    # than being cut (the client's EventSource connects again, to the next server).
    stop = anyio.Event()

    async def events() -> AsyncIterator[ServerSentEvent]:
        async for kind, fields in job_updates(jobs, record, public, progress_interval, stop):
            yield ServerSentEvent(data=to_json(fields).decode(), event=kind)

    return EventSourceResponse(
        events(),
        headers={"Cache-Control": "no-store"},
        shutdown_event=stop,
        shutdown_grace_period=SHUTDOWN_GRACE,
    )


SHUTDOWN_GRACE = 5.0
"""Seconds a stream has to end by itself once the server shuts down (it takes milliseconds)."""


async def job_updates(
    jobs: Jobs,
    record: JobRecord,
    public: Callable[[JobRecord], Mapping[str, Any]],
    progress_interval: float,
    stop: anyio.Event | None = None,
) -> AsyncIterator[tuple[str, Mapping[str, Any]]]:
    """The job's public fields each time they change: `("status", ...)` first and when its
    status or attempt changes (each change its history holds, even between two looks),
    `("progress", ...)` when only the rest does, and `("end", ...)` once it has finished, last.
    Stops early when `stop` is set, and (after logging why) if the job is deleted, `Jobs`
    stops or the database cannot be reached: a client's EventSource then connects again."""
    if record.finished:
        yield "end", public(record)
        return
    ending = asyncio.create_task(
        jobs.wait(record.id, timeout=math.inf), name=f"starlette_jobs events of job {record.id}"
    )
    # Its error is read here, or by `ending.result()` below, whichever comes first.
    ending.add_done_callback(lambda task: task.cancelled() or task.exception())
    stopping = asyncio.create_task(stop.wait()) if stop is not None else None
    try:
        # Where the history stands at `record`: what comes after it is news.
        seen = _where(await jobs.events(record.id), record, 0)
        shown: tuple[JobRecord, Mapping[str, Any]] | None = None
        while True:
            if shown is not None and _state(shown[0]) != _state(record):
                # Changed since the last look: the states in between are in its history.
                history = await jobs.events(record.id)
                now = _where(history, record, seen)
                for missed in _missed(history[seen : max(now - 1, seen)], shown[0], record):
                    yield "status", public(missed)
                    shown = missed, {}
                seen = max(seen, now)
            fields = public(record)
            if record.finished:
                yield "end", fields
                return
            if shown is None or _state(shown[0]) != _state(record):
                yield "status", fields
            elif fields != shown[1]:
                yield "progress", fields
            shown = record, fields
            done, _ = await asyncio.wait(
                {ending} if stopping is None else {ending, stopping},
                timeout=_next_look_in(record, progress_interval),
                return_when=asyncio.FIRST_COMPLETED,
            )
            if stopping in done:
                return
            latest = ending.result() if ending in done else await jobs.get(record.id)
            if latest is None:
                logger.info("job %s: deleted while its events were streamed", record.id)
                return
            record = latest
    except StarletteJobsError as error:  # Jobs stopping, the database gone, the job deleted
        logger.info("job %s: its event stream ends early: %s", record.id, error)
    finally:
        # Not awaited: the client may be gone, and this generator is being cancelled with it.
        ending.cancel()
        if stopping is not None:
            stopping.cancel()


def _state(record: JobRecord | JobEvent) -> tuple[JobStatus, int]:
    if isinstance(record, JobEvent):
        return record.status, record.attempt
    return record.status, record.attempts


def _where(history: Sequence[JobEvent], record: JobRecord, start: int) -> int:
    """How many events of `history` `record` has seen: up to the last one (from `start`) that
    left the job in `record`'s state. The history was read after the record, so later events
    are news; `start` if none matches (events are off)."""
    for index in range(len(history) - 1, start - 1, -1):
        if _state(history[index]) == _state(record):
            return index + 1
    return start


def _missed(history: Sequence[JobEvent], shown: JobRecord, latest: JobRecord) -> list[JobRecord]:
    """The job as each event of `history` left it, for the states not shown yet: its status,
    attempt and times as the event says, no result and no progress (a new attempt starts with
    none, and a past one's last progress is not kept); the rest as `latest` has it."""
    states: list[JobRecord] = []
    started_at, run_at = shown.started_at, shown.run_at
    last = _state(shown)
    for event in history:
        if event.kind is EventKind.CLAIMED:
            started_at = event.at
        run_at = event.run_at or run_at  # when a pending job is due next
        if event.status in _ENDED or _state(event) == last:
            continue
        last = _state(event)
        states.append(
            replace(
                latest,
                status=event.status,
                attempts=event.attempt,
                run_at=run_at,
                started_at=started_at,
                finished_at=None,
                worker_id=event.worker_id,
                result=None,
                progress=None,
            )
        )
    return states


_ENDED = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED})

NOT_DUE_LOOK = 60.0
"""Seconds between two looks at a pending job that is not due yet, at most."""


def _next_look_in(record: JobRecord, progress_interval: float) -> float:
    """A pending job that is not due changes only when it comes due (its end, by a cancel, is
    announced): no look before then, and one a minute at most, whatever the clocks say."""
    if record.status is not JobStatus.PENDING:
        return progress_interval
    due_in = (record.run_at - datetime.now(UTC)).total_seconds()
    return max(progress_interval, min(due_in, NOT_DUE_LOOK))
