"""The correlation id: taken from the request (`web/_correlation.CorrelationIdMiddleware`), stored
with each job it enqueues, and current again while that job runs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ._storable import storable

_current: ContextVar[str | None] = ContextVar("starlette_jobs_correlation_id", default=None)


def correlation_id() -> str | None:
    """The correlation id of the current request, or of the request that enqueued the job that
    is running now; None outside both."""
    return _current.get()


@contextmanager
def correlation_scope(value: str | None) -> Iterator[None]:
    """Make `value` the current correlation id for the duration of the block.

    It is stored with the jobs enqueued meanwhile: NUL characters and lone surrogates, which
    PostgreSQL cannot store, are kept as escapes."""
    token = _current.set(None if value is None else storable(value))
    try:
        yield
    finally:
        _current.reset(token)
