"""`current_job()`: what a running job can know about itself (id, attempt, ...)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RunningJob:
    """The job whose code is running now, as `current_job()` returns it."""

    id: int
    name: str
    queue: str
    attempt: int
    """1 on the first run, 2 on the first retry, ..."""
    max_attempts: int


_current: ContextVar[RunningJob | None] = ContextVar("starlette_jobs_current_job", default=None)


def current_job() -> RunningJob | None:
    """The job running in this task, or None outside a job (e.g. when called inline).

    Example:
        >>> @job(retry=Retry.fixed(max_attempts=3, delay=1))
        ... async def sync_crm(email: str) -> None:
        ...     if current_job().attempt < 3:
        ...         raise ConnectionError("CRM unavailable")
    """
    return _current.get()


@contextmanager
def running(job: RunningJob) -> Iterator[None]:
    token = _current.set(job)
    try:
        yield
    finally:
        _current.reset(token)
