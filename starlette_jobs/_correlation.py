"""The correlation id (`X-Request-ID`): taken from the request, stored with each job it enqueues,
and current again while that job runs."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._storable import storable

HEADER = "x-request-id"

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


class CorrelationIdMiddleware:
    """Makes each request's `X-Request-ID` (or a new one) current, and echoes it in the response.

    Jobs enqueued while handling the request carry it, and `correlation_id()` returns it inside
    them.

    Example:
        >>> app = Starlette(routes=..., middleware=[Middleware(CorrelationIdMiddleware)])
    """

    def __init__(self, app: ASGIApp, header: str = HEADER) -> None:
        self.app = app
        self.header = header.lower().encode("latin-1")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(self.header)
        value = given.decode("latin-1")[:200] if given else uuid.uuid4().hex

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[self.header.decode("latin-1")] = value
            await send(message)

        with correlation_scope(value):
            await self.app(scope, receive, send_with_header)
