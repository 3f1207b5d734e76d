"""The one enqueue path: measure the payloads, trace the send, insert the rows.

A started `Jobs` owns an `Enqueuer` and hands it down: to the jobs through the registry of
started enqueuers (`job.enqueue` writes through the most recent), or through
`configure(jobs=...)`. Nothing here reaches back up into `Jobs`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from time import perf_counter
from typing import Any

from ._errors import (
    DatabaseUnavailableError,
    IdempotencyKeyReusedError,
    JobArgumentsError,
    while_doing,
)
from ._held_jobs import request_jobs
from ._job import EnqueueOptions, Job, JobId
from ._metrics import Metrics
from ._records import NewJobs
from ._tracing import Tracing, stored_context
from ._workflow_records import EnqueuedWorkflow, NewWorkflow
from .postgres._transactions import CallerTransaction, driver_connection
from .store._protocol import Store


class Enqueuer:
    """Writes jobs to `store`; see the module's docstring."""

    def __init__(
        self,
        store: Callable[[], Store],
        tracing: Tracing,
        max_payload_bytes: int,
        metrics: Metrics | None = None,
    ) -> None:
        # The store, once it is ready: raises while the database has not been reachable since
        # start (its migrations may not be applied yet).
        self._store = store
        self._tracing = tracing
        self._metrics = Metrics() if metrics is None else metrics
        self._max_payload_bytes = max_payload_bytes
        # A character takes at most 4 bytes in UTF-8: a text this long or shorter is within
        # the limit without counting its bytes.
        self._longest_safe_payload = max_payload_bytes // 4
        self.after_enqueue: Callable[[list[JobId]], Awaitable[None]] | None = None
        """Awaited with the ids of each enqueue once written (the testing kit's eager mode)."""

    async def insert(
        self, job: Job[Any, Any], payloads: list[str], options: EnqueueOptions
    ) -> list[JobId]:
        """Inserts one job per payload (JSON text of validated arguments); returns the ids.
        With `on_success`, reserves the ids and holds the jobs for the current request."""
        if len(payloads) != 1 or len(payloads[0]) > self._longest_safe_payload:
            self._check_payload_sizes(job, payloads)
        store = self._store()
        queue = options.queue or job.queue
        tracing = self._tracing
        started = perf_counter() if self._metrics.recording() else None
        try:
            if tracing.recording():
                with tracing.send(queue, job.name) as scope:
                    ids = await self._write(
                        store, job, queue, payloads, options, scope.stored_context
                    )
                    scope.set_job_ids(ids)
            else:
                # The common case: no SDK, so no span to open; only the context to store with it.
                ids = await self._write(store, job, queue, payloads, options, stored_context())
        except Exception as error:
            if started is not None:
                self._metrics.sent(queue, job.name, len(payloads), perf_counter() - started, error)
            raise
        if started is not None:
            self._metrics.sent(queue, job.name, len(ids), perf_counter() - started, None)
        if self.after_enqueue is not None and not options.on_success:
            await self.after_enqueue(ids)
        return ids

    async def _write(
        self,
        store: Store,
        job: Job[Any, Any],
        queue: str,
        payloads: list[str],
        options: EnqueueOptions,
        trace_context: str | None,
    ) -> list[JobId]:
        new = NewJobs(
            name=job.name,
            queue=queue,
            payloads=payloads,
            priority=job.priority if options.priority is None else options.priority,
            delay=options.delay,
            run_at=options.run_at,
            max_attempts=job.retry.max_attempts,
            trace_context=trace_context,
            unique_key=options.unique_key,
            notify=_due_now(options),
            idempotency_key=options.idempotency_key,
        )
        connection = options.connection
        if options.on_success:
            held = request_jobs(store)
            holder = held.holder(new)
            if holder is not None:  # this request enqueued the key's job already
                job_id, arguments_differ = holder
                if arguments_differ and new.idempotency_key is not None:
                    raise IdempotencyKeyReusedError(new.name, job_id, new.idempotency_key)
                return [job_id]
            try:
                ids, taken = await store.reserve_ids(new)
            except DatabaseUnavailableError as error:
                raise while_doing("enqueue", error) from error
            if not taken:
                held.hold(store, replace(new, ids=tuple(ids)), self.after_enqueue)
            return ids
        if connection is not None:  # the caller's transaction, as the asyncpg connection
            connection = await driver_connection(connection)
        try:
            return await store.insert_jobs(new, connection)
        except DatabaseUnavailableError as error:
            raise while_doing("enqueue", error) from error

    async def insert_workflow(
        self, new: NewWorkflow, connection: CallerTransaction | None
    ) -> EnqueuedWorkflow:
        """Writes the workflow in one statement (in the caller's transaction with
        `connection`), every step with the trace context of one send span; see
        `_workflows.Workflow.enqueue`."""
        store = self._store()
        caller = None if connection is None else await driver_connection(connection)
        with self._tracing.send(new.queue_of(0), f"workflow:{new.name}") as scope:
            new = replace(new, trace_context=scope.stored_context)
            check_step_payload_sizes(new, self._max_payload_bytes)
            try:
                enqueued = await store.insert_workflow(new, caller)
            except DatabaseUnavailableError as error:
                raise while_doing("enqueue a workflow", error) from error
            scope.set_job_ids(list(enqueued.steps.values()))
        if self.after_enqueue is not None:
            first = [
                enqueued.steps[step]
                for position, step in enumerate(new.steps)
                if position not in new.upstream
            ]
            await self.after_enqueue(first)
        return enqueued

    def _check_payload_sizes(self, job: Job[Any, Any], payloads: list[str]) -> None:
        check_payload_sizes(job.name, payloads, self._max_payload_bytes)


def _due_now(options: EnqueueOptions) -> bool:
    """Whether a worker could run the job at once, so a NOTIFY is worth sending.

    The local clock is good enough here: this only decides whether to wake workers. When the
    job runs is decided by `run_at` against the database's clock.
    """
    if options.delay:
        return False
    return options.run_at is None or options.run_at <= datetime.now(UTC)


def check_payload_sizes(job_name: str, payloads: Sequence[str], limit: int) -> None:
    """Refuses arguments whose JSON text takes more than `limit` bytes (`max_payload_bytes`),
    wherever jobs are written from: `enqueue`, a workflow, the steps a running step adds.

    Raises:
        JobArgumentsError: one per job too large, located by its position in a batch.
    """
    longest_safe = limit // 4  # a character takes at most 4 bytes: only longer texts counted
    too_large = [
        {
            "loc": (index,) if len(payloads) > 1 else (),
            "msg": f"the arguments take {size} bytes as JSON, over the limit of {limit} "
            "(max_payload_bytes); store large data elsewhere and pass a key",
            "type": "payload_too_large",
        }
        for index, payload in enumerate(payloads)
        if len(payload) > longest_safe and (size := len(payload.encode())) > limit
    ]
    if too_large:
        raise JobArgumentsError(job_name, too_large)


def check_step_payload_sizes(new: NewWorkflow, limit: int) -> None:
    """`check_payload_sizes` for each step of `new` (a workflow, or the steps a running step
    adds), named by its job.

    Raises:
        JobArgumentsError: the first step whose arguments are too large.
    """
    longest_safe = limit // 4
    for position, payload in enumerate(new.payloads):
        if len(payload) > longest_safe:  # only longer texts can be over the limit
            check_payload_sizes(new.jobs[new.job_of[position]].name, [payload], limit)
