"""The request's side of the correlation id: `X-Request-ID` read from each request (or made),
made current while it is handled (`_correlation.correlation_scope`), and echoed in the response."""

from __future__ import annotations

import uuid

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._correlation import correlation_scope

HEADER = "x-request-id"


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
