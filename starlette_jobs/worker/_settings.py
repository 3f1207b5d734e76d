"""What a worker is told (`WorkerSettings`), its id, and the durations a drain may wait: checked
before anything waits on them, and how far ahead a drain looks for jobs."""

from __future__ import annotations

import logging
import math
import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from .._attempt_records import Unfinished
from .._queue import QueueLimits

logger = logging.getLogger("starlette_jobs.worker")


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    queues: Mapping[str, int]
    batch_size: int
    poll_interval: float
    lease_duration: float
    shutdown_grace: float
    retention: float | None
    # Seconds of event loop lag above which fewer jobs start (see _loop_lag); None: no limit.
    loop_lag_target: float | None = None
    # What every worker of each queue obeys, written to the queue's row at start (`_controls`);
    # a queue left out has no limit.
    limits: Mapping[str, QueueLimits] = field(default_factory=dict)
    # Seconds a job no live worker declares waits before this worker fails it (`_strays`);
    # 0: every job is claimed, one of an unknown name fails at once.
    unknown_job_grace: float = 600.0
    # The largest arguments, as JSON bytes, of a step a running step adds (`max_payload_bytes`).
    max_payload_bytes: int = 1024 * 1024


DEFAULT_RETRY_WAIT = 60.0
"""Seconds ahead that `drain(include_scheduled=False)`, `worker --burst` and `run_enqueued` look
for retries to wait for: a back-off that short is part of running a job, not a job for later."""


def check_drain_durations(timeout: float, retry_wait: float) -> None:
    """Refuses what no drain can wait for: NaN (it compares false with everything, so it would
    mean no deadline at all) and negative times.

    Raises:
        ValueError: `timeout` or `retry_wait` is not a number of seconds >= 0 (`math.inf` is).
    """
    for name, value in (("timeout", timeout), ("retry_wait", retry_wait)):
        if not isinstance(value, int | float) or math.isnan(value) or value < 0:
            raise ValueError(
                f"{name} must be a number of seconds >= 0 (math.inf: no limit), got {value!r}"
            )


def drain_horizon(remaining: float, wait: float) -> float | None:
    """How far ahead `drain` looks for pending jobs: `wait` seconds, never past its timeout;
    None is "any pending job"."""
    horizon = min(wait, max(remaining, 0.0))
    return horizon if math.isfinite(horizon) else None


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def log_left_pending(left: Unfinished, retry_horizon: float | None) -> None:
    if left.scheduled or left.retries:
        logger.info(
            "drain: done; %d job(s) left pending: %d scheduled for later, %d %s due in more "
            "than %.3g s",
            left.scheduled + left.retries, left.scheduled, left.retries,
            "retry" if left.retries == 1 else "retries", retry_horizon,
        )  # fmt: skip
    if left.unknown:
        logger.info(
            "drain: %d pending job(s) of names this process does not declare left for a worker "
            "that does (or, once unknown_job_grace has passed, to fail)", left.unknown,
        )  # fmt: skip
