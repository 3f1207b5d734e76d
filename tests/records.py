"""The records tests hand to a store directly: rows to insert, and how attempts ended."""

from __future__ import annotations

from typing import Protocol
from uuid import UUID

from starlette_jobs import JobStatus
from starlette_jobs._attempt_records import Outcome
from starlette_jobs._records import NewJobs


class Leased(Protocol):
    """A claim, or a test's memory of one."""

    @property
    def id(self) -> int: ...

    @property
    def lease_token(self) -> UUID: ...


def new_jobs(
    count: int = 1,
    *,
    name: str = "tests.jobs",
    queue: str = "default",
    payload: str = "{}",
    priority: int = 0,
    delay: float | None = None,
    max_attempts: int = 3,
    unique_key: str | None = None,
    idempotency_key: str | None = None,
) -> NewJobs:
    """`count` jobs with the same `payload` (JSON text), as another process may have written
    them; due now unless `delay` is given."""
    return NewJobs(
        name=name,
        queue=queue,
        payloads=[payload] * count,
        priority=priority,
        delay=delay,
        run_at=None,
        max_attempts=max_attempts,
        trace_context=None,
        unique_key=unique_key,
        notify=delay is None,
        idempotency_key=idempotency_key,
    )


def outcome(
    claim: Leased,
    status: JobStatus,
    *,
    delay: float | None = None,
    error: str | None = None,
    result: str | None = None,
) -> Outcome:
    """How the attempt under `claim`'s lease ended."""
    return Outcome(
        id=claim.id,
        lease_token=claim.lease_token,
        status=status,
        retry_delay=delay,
        error=error,
        result=result,
    )
