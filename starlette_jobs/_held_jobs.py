"""The jobs a request holds back until its response starts (`configure(on_success=True)`).

The enqueue path reserves their ids and holds them here (`request_jobs`); the web part,
`web/_on_success.OnSuccessMiddleware`, opens a `RequestJobs` for each request (`holding`) and,
when the response starts, has them written (all or none, in one transaction) or dropped. What
the client is answered when the write fails is decided here (`Refusal`) and sent by the
middleware. See docs/requests.md.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from ._errors import DatabaseUnavailableError, OnSuccessError, unavailable_as_error
from ._records import NewJobs
from .store._protocol import Store

logger = logging.getLogger("starlette_jobs")


@dataclass(frozen=True)
class Refusal:
    """The answer a request gets instead of its own when its jobs could not be written."""

    status: int
    detail: str
    retry_soon: bool = False
    """The database was unavailable: the client may try again in a moment (`Retry-After`)."""


@contextmanager
def holding() -> Iterator[RequestJobs]:
    """A `RequestJobs` for the request now starting, current until it ends; dropped then."""
    held = RequestJobs()
    token = _current.set(held)
    try:
        yield held
    finally:
        held.drop()
        _current.reset(token)


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

    def holder(self, new: NewJobs) -> tuple[int, bool] | None:
        """The job held here already that `new`'s key names, as the store would find a written
        one: one of its name with its idempotency key (that holder first), else one with its
        unique key. Its id, and whether it holds the idempotency key with other arguments."""
        by_unique_key = None
        for _, held in self._held:
            key = held.name, held.idempotency_key
            if new.idempotency_key is not None and key == (new.name, new.idempotency_key):
                return held.ids[0], _as_json(held.payloads[0]) != _as_json(new.payloads[0])
            taken = new.unique_key is not None and held.unique_key == new.unique_key
            if taken and by_unique_key is None:
                by_unique_key = held.ids[0], False
        return by_unique_key

    def check_database(self, store: Store) -> None:
        """Raises `OnSuccessError` if the jobs held are for another database than `store`'s."""
        if self._held and self._held[0][0].database != store.database:
            raise OnSuccessError(
                "this request holds on_success=True jobs for another database (or schema) "
                "already: they are written all or none, in one transaction, which cannot span "
                "two databases or schemas; enqueue the jobs of one request through Jobs on one "
                "database (the same dsn and schema)"
            )

    @property
    def ids(self) -> list[int]:
        return [job_id for _, new in self._held for job_id in new.ids]

    async def respond(self, status: int) -> Refusal | None:
        """Writes the held jobs if `status` is a success; returns what to answer instead of
        the app's response when that failed."""
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
            return Refusal(
                status, "the jobs of this request could not be written; try again", unavailable
            )
        if missing:
            logger.warning(
                "jobs %s of a request were not written: their key was taken by a request that "
                "ran at the same time; answering 409",
                missing,
            )
            return Refusal(409, "a request with the same key is in progress; try again")
        for after_write in self._after_write:
            await after_write([job_id for _, new in held for job_id in new.ids])
        return None

    def drop(self) -> None:
        """No response started (the app raised, or was cancelled): the jobs are not written."""
        if self._held:
            logger.info("jobs %s of a request that did not succeed are not written", self.ids)
        self._held.clear()


def _as_json(payload: str) -> str:
    """The arguments' JSON in one spelling: key order and spacing are no difference, as
    PostgreSQL's jsonb compares them."""
    return json.dumps(json.loads(payload), sort_keys=True)
