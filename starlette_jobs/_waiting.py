"""Waiting for jobs to finish: `jobs.wait(id)` and its typed form `jobs.result(job, id)`.

A `Jobs` keeps one outcome listener (LISTEN on PostgreSQL), opened on the first wait and shared
by every waiter. A wait asks the store to announce the job's end (`want_outcome`, which flags
the row) only after the listener is open, so no announcement can slip between the two; the
flag is on that one row, so the statements that finish other jobs notify nobody and enqueue
and claim never pay for waiting. One `_Watch` per job id serves all its waiters. Should an
announcement be lost (the listener's connection dropped), each watch looks at its job again
every `recheck_interval` seconds, and the listener is reopened once it stops answering.
"""

from __future__ import annotations

import asyncio
import logging
import math
import typing
import weakref
from typing import Any, TypeVar, overload

import pydantic

from ._errors import (
    DatabaseUnavailableError,
    JobCancelledError,
    JobFailedError,
    JobNotFoundError,
    JobResultError,
    NotStartedError,
    unavailable_as_error,
)
from ._failures import FailureLog
from ._job import Job, JobId
from ._records import FINISHED, JobRecord, JobStatus
from ._row_ids import row_id_of
from .store._protocol import Listener, Store

logger = logging.getLogger("starlette_jobs")

T = TypeVar("T")

RECHECK_INTERVAL = 5.0
"""Seconds between two looks at a waited-for job when no announcement comes."""


class NotFinished(Exception):
    """The job had not finished when the wait's time ran out."""

    def __init__(self, status: JobStatus | None) -> None:
        self.status = status


class _Watch:
    """The waiters of one job: one task looks at it for them all."""

    def __init__(self) -> None:
        self.woken = asyncio.Event()
        self.waiters = 0
        self.status: JobStatus | None = None
        self.task: asyncio.Task[JobStatus | None] | None = None


class OutcomeWaiters:
    """What `wait` needs of one started `Jobs`: its shared listener and its watches."""

    def __init__(self, store: Store, recheck_interval: float = RECHECK_INTERVAL) -> None:
        self._store = store
        self._recheck_interval = recheck_interval
        self._failures = FailureLog(logger, "looking at the jobs waited for")
        self._listener: Listener | None = None
        self._listener_checked_at = 0.0
        self._refresh: asyncio.Task[bool] | None = None
        self._watches: dict[int, _Watch] = {}
        self._closed = False

    @property
    def watched(self) -> int:
        """How many jobs are waited for now (for tests: none after the waiters left)."""
        return len(self._watches)

    async def finished_status(self, job_id: int, timeout: float) -> JobStatus:
        """Waits until the job has finished; returns the status it finished in.

        Raises:
            JobNotFoundError: no job has this id.
            NotFinished: it had not finished after `timeout` seconds.
        """
        if self._closed:
            raise NotStartedError("Jobs is stopped: no more waiting for jobs")
        watch = self._watches.get(job_id)
        if watch is None:
            watch = self._watches[job_id] = _Watch()
            watch.task = asyncio.create_task(
                self._watch(job_id, watch), name=f"starlette_jobs wait for job {job_id}"
            )
        task = watch.task
        assert task is not None
        watch.waiters += 1
        try:
            async with asyncio.timeout(None if math.isinf(timeout) else timeout):
                status = await asyncio.shield(task)
        except TimeoutError:
            raise NotFinished(watch.status) from None
        except asyncio.CancelledError:
            # The watch was stopped by `close`, not this waiter by its own caller.
            current = asyncio.current_task()
            if self._closed and task.cancelled() and current and not current.cancelling():
                raise NotStartedError(
                    f"Jobs stopped while waiting for job {job_id} to finish"
                ) from None
            raise
        finally:
            watch.waiters -= 1
            if not watch.waiters:
                # The last waiter leaves: stop looking (a timeout, a cancelled request).
                task.cancel()
                if self._watches.get(job_id) is watch:
                    del self._watches[job_id]
        if status is None:
            raise JobNotFoundError(f"no job with id {job_id}")
        return status

    async def _watch(self, job_id: int, watch: _Watch) -> JobStatus | None:
        first = True
        while True:
            try:
                await self._listening()
                # Cleared before asking: an announcement that comes while `want_outcome` runs
                # is kept for the wait below.
                watch.woken.clear()
                status = await self._store.want_outcome(job_id)
            except DatabaseUnavailableError as error:
                if first:  # the caller learns at once that the database is not there
                    raise
                self._failures.failed(error)  # once for every wait, not once a look of each
            else:
                self._failures.succeeded()
                if status is None or status in FINISHED:
                    return status
                watch.status = status
            first = False
            try:
                async with asyncio.timeout(self._recheck_interval):
                    await watch.woken.wait()
            except TimeoutError:
                pass

    async def _listening(self) -> None:
        """Opens the shared listener if need be; reopens it once it no longer answers (looked
        at every `recheck_interval` at most). The opening runs in a task of its own that a
        waiter leaving does not cancel: a connect cut short by a cancellation leaves the
        driver a future whose error nobody retrieves, and a half-open listener."""
        if self._refresh is None:
            self._refresh = asyncio.create_task(
                self._refresh_listener(), name="starlette_jobs outcome listener"
            )
        refresh = self._refresh
        try:
            reopened = await asyncio.shield(refresh)
        finally:
            if refresh.done() and self._refresh is refresh:
                self._refresh = None
        if reopened:  # announcements may have been lost meanwhile: every watch looks again
            for watch in self._watches.values():
                watch.woken.set()

    async def _refresh_listener(self) -> bool:
        """`_listening`'s work, one at a time; returns whether the listener was reopened."""
        loop = asyncio.get_running_loop()
        reopened = False
        if self._listener is not None:
            if loop.time() - self._listener_checked_at < self._recheck_interval:
                return False
            if await self._listener.alive(self._recheck_interval):
                self._listener_checked_at = loop.time()
                return False
            logger.warning("the listener for job outcomes stopped answering; reopening it")
            self._listener.terminate()
            self._listener = None
            reopened = True
        self._listener = await self._store.listen_for_outcomes(self._announced)
        self._listener_checked_at = loop.time()
        return reopened

    def _announced(self, job_id: int) -> None:
        watch = self._watches.get(job_id)
        if watch is not None:
            watch.woken.set()

    async def close(self) -> None:
        """Stops every wait (they raise `NotStartedError`) and closes the listener."""
        self._closed = True
        tasks = [watch.task for watch in self._watches.values() if watch.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._refresh is not None:  # an opening no waiter waits for any more
            await asyncio.gather(self._refresh, return_exceptions=True)
            self._refresh = None
        if self._listener is not None:
            listener, self._listener = self._listener, None
            await listener.close()

    def terminate(self) -> None:
        self._closed = True
        for watch in self._watches.values():
            if watch.task is not None:
                watch.task.cancel()
        if self._refresh is not None:
            self._refresh.cancel()
            self._refresh = None
        if self._listener is not None:
            self._listener.terminate()
            self._listener = None


class JobWaiting:
    """The part of `Jobs` that waits for jobs to finish; `Jobs` supplies the two below."""

    @property
    def _ready_store(self) -> Store:
        raise NotImplementedError

    @property
    def _ready_waiters(self) -> OutcomeWaiters:
        raise NotImplementedError

    async def wait(self, job_id: JobId, timeout: float = 30.0) -> JobRecord:
        """Waits until the job has finished (succeeded, failed or cancelled) and returns it.

        The database wakes the wait as the job's outcome is written (LISTEN/NOTIFY on
        PostgreSQL); see docs/waiting.md.

        Args:
            job_id: what `enqueue` returned.
            timeout: seconds to wait at most.

        Returns:
            The finished job, as `jobs.get` would return it.

        Raises:
            JobNotFoundError: no job has this id.
            TimeoutError: the job had not finished after `timeout` seconds (it goes on).

        Example:
            >>> record = await jobs.wait(job_id, timeout=10)
            >>> record.status, record.result
        """
        _check_timeout(timeout)
        row_id = row_id_of(job_id)
        if row_id is None:
            raise JobNotFoundError(f"no job with id {job_id!r}")
        waiters = self._ready_waiters
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            left = deadline - asyncio.get_running_loop().time()
            try:
                with unavailable_as_error(f"wait for job {row_id}"):
                    await waiters.finished_status(row_id, left)
                    record = await self._ready_store.get_job(row_id)
            except NotFinished as late:
                now = "" if late.status is None else f" (it is {late.status.value})"
                raise TimeoutError(f"job {row_id} did not finish within {timeout} s{now}") from None
            if record is None:
                raise JobNotFoundError(f"no job with id {row_id} (it was deleted)")
            if record.finished:
                return record
            # `jobs.retry` ran it again right after it finished: wait for the new run.

    @overload
    async def result(
        self, job: Job[Any, typing.Coroutine[Any, Any, T]], job_id: JobId, *, timeout: float = ...
    ) -> T: ...

    @overload
    async def result(self, job: Job[Any, T], job_id: JobId, *, timeout: float = ...) -> T: ...

    async def result(self, job: Job[Any, Any], job_id: JobId, *, timeout: float = 30.0) -> Any:
        """Waits for a job of `job` to finish and returns what it returned, validated into the
        function's return annotation (a `datetime` comes back a `datetime`, a model a model).

        Args:
            job: the `@job` function the id was enqueued with.
            job_id: what its `enqueue` returned.
            timeout: seconds to wait at most.

        Raises:
            JobFailedError: the job failed for good (`.record`, `.last_error`).
            JobCancelledError: the job was cancelled (its partial result: `.record.result`).
            JobResultError: the stored result does not fit the return annotation.
            JobNotFoundError: no job of `job` has this id (no job at all, or another's).
            TimeoutError: the job had not finished after `timeout` seconds.

        Example:
            >>> job_id = await resize.enqueue(image_id=7)
            >>> thumbnail = await jobs.result(resize, job_id, timeout=10)
        """
        _check_timeout(timeout)
        row_id = row_id_of(job_id)
        record = None
        if row_id is not None:
            with unavailable_as_error(f"get job {row_id}"):
                record = await self._ready_store.get_job(row_id)
        if record is None:
            raise JobNotFoundError(f"no job with id {job_id!r}")
        if record.name != job.name:
            raise JobNotFoundError(
                f"job {record.id} is a job of {record.name!r}, not of {job.name!r}"
            )
        if not record.finished:
            record = await self.wait(record.id, timeout)
        if record.status is JobStatus.FAILED:
            raise JobFailedError(record)
        if record.status is JobStatus.CANCELLED:
            raise JobCancelledError(record)
        try:
            return _result_adapter(job).validate_python(record.result)
        except pydantic.ValidationError as error:
            errors = [dict(e) for e in error.errors(include_url=False)]
            raise JobResultError(record, errors) from None


_adapters: weakref.WeakKeyDictionary[Job[Any, Any], pydantic.TypeAdapter[Any]] = (
    weakref.WeakKeyDictionary()
)


def _result_adapter(job: Job[Any, Any]) -> pydantic.TypeAdapter[Any]:
    """A validator of the job's return annotation (of what an async one's coroutine returns),
    built on first use and kept with the job. No annotation: anything goes."""
    adapter = _adapters.get(job)
    if adapter is None:
        try:
            returned = typing.get_type_hints(job.func).get("return", Any)
        except Exception:  # the job validated its parameters' hints; a return hint may not
            returned = Any
        adapter = _adapters[job] = pydantic.TypeAdapter(returned)
    return adapter


def _check_timeout(timeout: float) -> None:
    # A comparison that NaN fails, so that it is refused too.
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0:
        raise ValueError(
            f"timeout must be a number of seconds >= 0 (math.inf: no limit), got {timeout!r}"
        )
