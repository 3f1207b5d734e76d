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
        value, raw = _read(given) if given else _new_id()

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])  # optional in ASGI: no headers at all
                headers = MutableHeaders(scope=message)
                del headers[self.header.decode("latin-1")]
                # The bytes as they came: setting the text would encode it as Latin-1, which
                # cannot hold every character of a UTF-8 id.
                headers.raw.append((self.header, raw))
            await send(message)

        with correlation_scope(value):
            await self.app(scope, receive, send_with_header)


MAX_LENGTH = 200
"""The longest id kept, in characters; a longer one is cut."""


def _read(given: bytes) -> tuple[str, bytes]:
    """The id, as the characters the client sent, and the bytes to echo. UTF-8 when the bytes
    are UTF-8, as `Idempotency-Key` is read (Starlette reads them as Latin-1, which made `é`
    into `Ã©`); else a character per byte, since a correlation id is never refused."""
    try:
        value = given.decode()[:MAX_LENGTH]
        return value, value.encode()
    except UnicodeDecodeError:
        value = given.decode("latin-1")[:MAX_LENGTH]
        return value, value.encode("latin-1")


def _new_id() -> tuple[str, bytes]:
    value = uuid.uuid4().hex
    return value, value.encode()
