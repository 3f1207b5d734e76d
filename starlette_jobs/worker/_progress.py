"""Coalesced progress writes: however often jobs report progress, one statement per interval.

Only the latest value of each attempt (lease token) is kept; every `PROGRESS_INTERVAL` at most,
all of them are written by one `record_progress` statement, fenced by their tokens. 10,000 jobs
reporting 100 times a second cost two statements a second, not a million. When an attempt ends,
its last value not yet written goes into its outcome (`take`), so the final progress is never
lost to the interval. A statement carries at most `MAX_STATEMENT_LENGTH` characters of values:
when more are pending, the rest wait for the next interval (the oldest first), so that no
statement runs long enough to be taken for an outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from uuid import UUID

from .._errors import DatabaseUnavailableError
from .._failures import FailureLog
from .._storable import MAX_STATEMENT_LENGTH
from ..store._connectivity import Backoff
from ..store._protocol import Store

logger = logging.getLogger("starlette_jobs.worker")

PROGRESS_INTERVAL = 0.5
"""Seconds between two progress statements of one worker, at least."""


class ProgressWriter:
    """Keeps the latest progress of each attempt and writes them all, at most once an
    interval. `report` may be called from any thread (sync jobs run in threads)."""

    def __init__(self, store: Store, interval: float = PROGRESS_INTERVAL) -> None:
        self._store = store
        self._interval = interval
        self._lock = threading.Lock()
        # lease token -> (job id, JSON text): the latest value not yet written, and the values
        # of the statement in flight.
        self._pending: dict[UUID, tuple[int, str]] = {}
        self._in_flight: dict[UUID, tuple[int, str]] = {}
        self._has_pending = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self.statements = 0
        """How many `record_progress` statements were sent."""

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._pending:
            self._has_pending.set()
        self._task = asyncio.create_task(self._run(), name="starlette_jobs progress writer")

    async def stop(self) -> None:
        """Stops writing. Values not written are dropped: the attempts that ended took theirs
        into their outcomes, and a released job's progress is reset when it is claimed again."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def report(self, job_id: int, token: UUID, text: str) -> None:
        """The attempt holding `token` reports `text` (JSON), replacing what it reported before
        that is not written yet."""
        with self._lock:
            was_empty = not self._pending
            self._pending[token] = (job_id, text)
        if was_empty:
            self._wake()

    def take(self, token: UUID) -> str | None:
        """The attempt ended: its last value that is not known to be written (JSON text, or
        None), for its outcome. Nothing of it is written by this writer afterwards, unless the
        statement in flight holds it (writing it twice does no harm)."""
        if not self._pending and not self._in_flight:
            return None  # nothing reported by anyone: the usual case, no lock to take
        with self._lock:
            pending = self._pending.pop(token, None)
            if pending is None:
                pending = self._in_flight.get(token)
        return None if pending is None else pending[1]

    def _wake(self) -> None:
        loop = self._loop
        if loop is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._has_pending.set()
            return
        # The loop may be closed: a sync job's thread outlived its worker.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._has_pending.set)

    async def _run(self) -> None:
        backoff = Backoff()
        failures = FailureLog(logger, "recording job progress")
        while True:
            await self._has_pending.wait()
            self._has_pending.clear()
            try:
                await self.write_pending()
            except DatabaseUnavailableError as error:
                failures.failed(error)
                await backoff.wait()
                continue
            except Exception:
                logger.exception("could not record job progress; these values are dropped")
            else:
                failures.succeeded()
            backoff.reset()
            # The bound on statements: nothing is written for an interval after a write.
            await asyncio.sleep(self._interval)

    async def write_pending(self) -> None:
        """Writes every pending value in one statement. On a database error, the values are
        kept (unless newer ones replaced them) and the error raised."""
        with self._lock:
            batch, self._pending = self._pending, {}
            if sum(len(text) for _, text in batch.values()) > MAX_STATEMENT_LENGTH:
                batch, self._pending = _split(batch)
                self._has_pending.set()  # the rest: in the next statement, an interval later
            self._in_flight = batch
        if not batch:
            return
        rows = [(job_id, token, text) for token, (job_id, text) in batch.items()]
        try:
            self.statements += 1
            written = await self._store.record_progress(rows)
        except DatabaseUnavailableError:
            with self._lock:
                for token, value in batch.items():
                    self._pending.setdefault(token, value)
                self._has_pending.set()
            raise
        finally:
            with self._lock:
                self._in_flight = {}
        refused = len(rows) - len(written)
        if refused:
            # The lease moved on (the job ended, was rescued or released): nothing to keep.
            logger.debug("progress of %d job(s) not recorded: lease no longer held", refused)


_Values = dict[UUID, tuple[int, str]]


def _split(batch: _Values) -> tuple[_Values, _Values]:
    """`batch` cut in two: the values that fit in one statement (at least one), from the
    first, and the rest, in their order."""
    first: _Values = {}
    rest: _Values = {}
    length = 0
    for token, value in batch.items():
        length += len(value[1])
        if first and (rest or length > MAX_STATEMENT_LENGTH):
            rest[token] = value
        else:
            first[token] = value
    return first, rest
