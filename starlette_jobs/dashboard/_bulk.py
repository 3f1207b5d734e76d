"""The dashboard's bulk actions: retry or cancel every job the list's filter matches, in
batches on the server (`jobs.begin_bulk`, `jobs.run_bulk`), never one request per job. The
hook is asked once per bulk action, as "bulk_retry" or "bulk_cancel" on the filter's queue (a
bulk action is always over one queue: who may act is decided per queue). The action runs as a
task of the process that served the POST; its record is its audit record and the progress its
page shows. If that process stops, the record stays unfinished and its page offers to run it on
from its last batch."""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import parse_qsl

from starlette.requests import Request

from .._bulk_records import ACTED_ON, BULK_ACTIONS, BulkAction, BulkRecord
from .._jobs import Jobs
from ._actions import Actions, Done, Refused
from ._listing import FilterError, JobFilter, job_id

logger = logging.getLogger("starlette_jobs.dashboard")

BATCH_SIZE = 500


def bulk_actions(filters: JobFilter) -> list[str]:
    """The bulk actions the list's filter allows, for its buttons: a queue chosen, a status
    (if any) the action changes, and no time bound for a cancel (it bounds finished jobs). None
    for a list filtered by trace or correlation id: a bulk action does not filter by them, so
    it would reach other jobs than those listed."""
    if filters.queue is None or filters.trace_id is not None or filters.correlation_id is not None:
        return []
    return [
        action
        for action in BULK_ACTIONS
        if (filters.status is None or filters.status in ACTED_ON[action])
        and (filters.finished_after is None or action == "retry")
    ]


class BulkRuns:
    """Starts the bulk actions the hook allows, runs each as a task, and runs on those left
    unfinished."""

    def __init__(self, jobs: Jobs, actions: Actions, batch_size: int = BATCH_SIZE) -> None:
        self._jobs = jobs
        self._actions = actions
        self._batch_size = batch_size
        self._running: dict[int, asyncio.Task[BulkRecord | None]] = {}

    def running(self, bulk_id: int) -> bool:
        """Whether this process is running the bulk action now."""
        return bulk_id in self._running

    async def start(self, request: Request, base: str, action: str) -> Done:
        """The bulk action of the POSTed form's filter, recorded and started.

        Raises:
            Refused: an unknown action, a filter with no queue or that names nothing, or the
                checks of `Actions.allowed` (read-only, CSRF, the hook).
        """
        if action not in BULK_ACTIONS:
            raise Refused(404, f"no bulk action is called {action!r}")
        form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
        try:
            filters = JobFilter.from_query(form)
        except FilterError as error:
            raise Refused(400, str(error)) from None
        if filters.queue is None:
            raise Refused(400, "a bulk action is over one queue: filter the list by queue first")
        if filters.finished_after is not None and action == "cancel":
            raise Refused(400, "a bulk cancel acts on unfinished jobs: no time bound matches them")
        who = await self._actions.allowed(request, f"bulk_{action}", filters.queue)
        bulk_action: BulkAction = "retry" if action == "retry" else "cancel"
        record = await self._jobs.begin_bulk(
            bulk_action, queue=filters.queue, status=filters.status, name=filters.name, by=who,
            finished_after=filters.finished_after,
        )  # fmt: skip
        logger.info(
            "dashboard: %s: bulk %s %s of queue %r (status %s, name %s): %s jobs",
            who, action, record.id, record.queue, record.status, record.name, record.matched,
        )  # fmt: skip
        self._run(record.id)
        return Done(f"{base}/bulk/{record.id}")

    async def run_on(self, request: Request, base: str, text: str) -> Done:
        """Runs on a bulk action left unfinished, asking the hook again.

        Raises:
            Refused: no such bulk action, or the checks of `Actions.allowed`.
        """
        try:
            bulk_id = job_id(text, "the bulk action's id")
        except FilterError:
            bulk_id = None
        record = None if bulk_id is None else await self._jobs.get_bulk(bulk_id)
        if record is None:
            raise Refused(404, f"no bulk action {text}")
        who = await self._actions.allowed(request, f"bulk_{record.action}", record.queue)
        if not record.finished and not self.running(record.id):
            logger.info("dashboard: %s: runs on bulk %s %s", who, record.action, record.id)
            self._run(record.id)
        return Done(f"{base}/bulk/{record.id}")

    def _run(self, bulk_id: int) -> None:
        task = asyncio.create_task(self._jobs.run_bulk(bulk_id, batch_size=self._batch_size))
        self._running[bulk_id] = task
        task.add_done_callback(lambda done: self._ended(bulk_id, done))

    def _ended(self, bulk_id: int, task: asyncio.Task[BulkRecord | None]) -> None:
        self._running.pop(bulk_id, None)
        if task.cancelled():
            logger.warning("dashboard: bulk action %s stopped unfinished (cancelled)", bulk_id)
        elif (error := task.exception()) is not None:
            logger.error(
                "dashboard: bulk action %s stopped unfinished: %r; its page can run it on",
                bulk_id, error, exc_info=error,
            )  # fmt: skip
