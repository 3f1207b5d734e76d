"""On-success enqueue: a job that exists if and only if the request that enqueued it succeeded.

With `OnSuccessMiddleware` around the app, `configure(on_success=True).enqueue(...)` validates
the job and reserves its id at once (so the handler can put the id in its response), but holds
the row back. When the response starts, the held jobs are written, all or none in one
transaction, if its status is below 400, before the response goes out; otherwise (a 4xx, a 5xx,
an exception, no response at all) they are dropped. One transaction needs one database: the
jobs of one request may go through several `Jobs` on one database, but a job for another
database is refused as it is enqueued (all-or-none across two would take two-phase commit).
Unlike Starlette's `BackgroundTasks`, what is written is durable: it survives a crash of the
process that answered.

If writing them fails, the response does not claim a success it cannot stand for: the client
gets a 503 instead when the database is unavailable (500 for any other error; 409 when a job's
unique or idempotency key was taken meanwhile by a request that ran at the same time), and a
retry can do it again.
"""

from __future__ import annotations

from contextlib import suppress

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._held_jobs import holding


class _ResponseReplaced(Exception):
    """Raised into the app from `send` once its response was replaced by a refusal: the app's
    response goes no further, so neither does its `background=` task (which would do, after a
    503, the work the client was told was not done)."""


class OnSuccessMiddleware:
    """Writes the jobs a request enqueued with `configure(on_success=True)` when its response
    starts with a status below 400, before it goes out; drops them otherwise. See
    docs/requests.md.

    Example:
        >>> app = Starlette(routes=..., middleware=[Middleware(OnSuccessMiddleware)])
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with holding() as held:
            replaced = False

            async def send_once_written(message: Message) -> None:
                nonlocal replaced
                if replaced:  # the app's own response is not sent: another one was instead
                    return
                if message["type"] == "http.response.start":
                    refusal = await held.respond(message["status"])
                    if refusal is not None:
                        replaced = True
                        headers = {"Retry-After": "1"} if refusal.retry_soon else None
                        instead = JSONResponse(
                            {"detail": refusal.detail}, refusal.status, headers=headers
                        )
                        await instead(scope, receive, send)
                        raise _ResponseReplaced
                await send(message)

            with suppress(_ResponseReplaced):
                await self.app(scope, receive, send_once_written)
