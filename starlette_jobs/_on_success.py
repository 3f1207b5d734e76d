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

import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar

from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._errors import DatabaseUnavailableError, OnSuccessError, unavailable_as_error
from ._records import NewJobs
from ._store import Store

logger = logging.getLogger("starlette_jobs")

_current: ContextVar[RequestJobs | None] = ContextVar("starlette_jobs_request_jobs", default=None)


def request_jobs(store: Store) -> RequestJobs:
    """The jobs held for the current request, which `store`'s are to join.

    Raises:
        OnSuccessError: no request is in progress under `OnSuccessMiddleware`, or its response
            has started already, or it holds jobs for another database than `store`'s.
    """
    held = _current.get()
    if held is None:
        raise OnSuccessError(
            "on_success=True holds a job until the current request's response starts, but no "
            "request is in progress here: add OnSuccessMiddleware to the app "
            "(`Starlette(middleware=[Middleware(OnSuccessMiddleware)])`), or enqueue without it"
        )
    if held.status is not None:
        raise OnSuccessError(
            f"the response of this request has started already (status {held.status}): "
            "on_success=True is for jobs enqueued before it; enqueue without it"
        )
    held.check_database(store)
    return held


class RequestJobs:
    """The jobs one request enqueued with `on_success=True`, their ids reserved."""

    def __init__(self) -> None:
        self._held: list[tuple[Store, NewJobs]] = []
        self.status: int | None = None
        """The response's status once it started: the jobs' fate is decided."""
        # What to await with the ids once they are written (the testing kit's eager mode).
        self._after_write: list[Callable[[list[int]], Awaitable[None]]] = []

    def hold(
        self,
        store: Store,
        new: NewJobs,
        after_write: Callable[[list[int]], Awaitable[None]] | None = None,
    ) -> None:
        self._held.append((store, new))
        if after_write is not None and after_write not in self._after_write:
            self._after_write.append(after_write)

    def check_database(self, store: Store) -> None:
        """Raises `OnSuccessError` if the jobs held are for another database than `store`'s."""
        if self._held and self._held[0][0].database != store.database:
            raise OnSuccessError(
                "this request holds on_success=True jobs for another database already: they "
                "are written all or none, in one transaction, which cannot span two databases; "
                "enqueue the jobs of one request through Jobs on one database (the same dsn)"
            )

    @property
    def ids(self) -> list[int]:
        return [job_id for _, new in self._held for job_id in new.ids]

    async def respond(self, status: int) -> Response | None:
        """Writes the held jobs if `status` is a success; returns the response to send instead
        of the app's when that failed."""
        self.status = status
        held, self._held = self._held, []
        if not held:
            return None
        if status >= 400:
            ids = [job_id for _, new in held for job_id in new.ids]
            logger.info("jobs %s are not written: the response's status is %s", ids, status)
            return None
        try:
            with unavailable_as_error("write the jobs of the request"):
                # All on one database (`request_jobs` saw to it): any of its stores writes all.
                batch = [new for _, new in held]
                written = await held[0][0].insert_reserved(batch)
                missing = [i for new in batch for i in new.ids if i not in written]
        except Exception as error:
            # Not the app's success: the client must not take the work for done.
            ids = [job_id for _, new in held for job_id in new.ids]
            unavailable = isinstance(error, DatabaseUnavailableError)
            status = 503 if unavailable else 500
            logger.exception("jobs %s of a request could not be written: answering %s", ids, status)
            return JSONResponse(
                {"detail": "the jobs of this request could not be written; try again"},
                status_code=status,
                headers={"Retry-After": "1"} if unavailable else None,
            )
        if missing:
            logger.warning(
                "jobs %s of a request were not written: their key was taken by a request that "
                "ran at the same time; answering 409",
                missing,
            )
            return JSONResponse(
                {"detail": "a request with the same key is in progress; try again"},
                status_code=409,
            )
        for after_write in self._after_write:
            await after_write([job_id for _, new in held for job_id in new.ids])
        return None

    def drop(self) -> None:
        """No response started (the app raised, or was cancelled): the jobs are not written."""
        if self._held:
            logger.info("jobs %s of a request that did not succeed are not written", self.ids)
        self._held.clear()


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
        held = RequestJobs()
        replaced = False

        async def send_once_written(message: Message) -> None:
            nonlocal replaced
            if replaced:  # the app's own response is not sent: another one was instead
                return
            if message["type"] == "http.response.start":
                instead = await held.respond(message["status"])
                if instead is not None:
                    replaced = True
                    await instead(scope, receive, send)
                    return
            await send(message)

        token = _current.set(held)
        try:
            await self.app(scope, receive, send_once_written)
        finally:
            held.drop()
            _current.reset(token)
