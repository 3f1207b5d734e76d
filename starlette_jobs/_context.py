"""`current_job()`: what a running job can know about itself (id, attempt, ...)."""

from __future__ import annotations

from contextvars import ContextVar, Token
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


class running:  # lower case: used like the context-manager function it was
    """Makes `job` the current job for the duration of the block. A class rather than a
    generator: the worker enters one per attempt, and this costs a third as much."""

    __slots__ = ("_job", "_token")
    _token: Token[RunningJob | None]

    def __init__(self, job: RunningJob) -> None:
        self._job = job

    def __enter__(self) -> None:
        self._token = _current.set(self._job)

    def __exit__(self, *exc_info: object) -> None:
        _current.reset(self._token)
