"""Retention: deleting jobs finished longer than `retention` ago, with their events, at the pace
they finish, and the records of bulk actions finished as long ago.

Each round looks at the old finished jobs `BATCH` at a time, oldest first, deleting those not
kept (steps of a running workflow), for up to `ROUND_SECONDS`; a round that ran out of time
with old jobs still to look at is followed by the next one at once (after `BEHIND_PAUSE`),
else by the next one `interval` later. Each round goes on where the last one left off, and
the one after the last old job starts from the first again: old steps kept by the million
are read past once a pass, a batch at a time, never all in one statement or one round.

So a worker keeps pace with however many jobs finish per second (one batch takes milliseconds;
see benchmarks/retention.py and docs/reliability.md), and works off a backlog (retention newly
set on a large table, a worker that was down) in one go, while each statement stays short and
holds its row locks briefly.

It runs in a task of its own, apart from the rescue of expired leases (`_upkeep.Upkeep`) and
the heartbeat (`_leases.py`): a long backlog delays neither, and its statements go through the
store's shared pool, never the connection that renews leases.
"""

from __future__ import annotations

import asyncio
import logging

from .._attempt_records import PruneCursor
from .._failures import FailureLog
from ..store._protocol import Store

logger = logging.getLogger("starlette_jobs.worker")

# Rows per statement: measured, larger batches delete no faster per row (benchmarks/retention.py)
# and hold their locks for longer.
BATCH = 1000
# A round gives way after this long, to log what it did, and to stop promptly at shutdown.
ROUND_SECONDS = 1.0
# Between two rounds while behind: other statements get the pool's connection in between.
BEHIND_PAUSE = 0.05


class Retention:
    """Deletes the jobs finished more than `retention` seconds ago (None: keeps every job), a
    round every `interval` seconds, or at once while a round leaves some behind."""

    def __init__(self, store: Store, interval: float, retention: float | None) -> None:
        self._store = store
        self._interval = interval
        self._retention = retention
        self._task: asyncio.Task[None] | None = None
        # Where the next batch starts; None: at the first old job.
        self._after: PruneCursor | None = None

    def start(self) -> None:
        if self._retention is not None:
            self._task = asyncio.create_task(self._run(), name="starlette_jobs retention")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        failures = FailureLog(logger, "retention")
        while True:
            await asyncio.sleep(self._interval)
            behind = True
            while behind:
                try:
                    behind = await self.prune_round()
                except Exception as error:
                    failures.failed(error)
                    break
                failures.succeeded()
                if behind:
                    await asyncio.sleep(BEHIND_PAUSE)

    async def prune_round(self) -> bool:
        """One round: batches until one looked at the last old job, for up to
        `ROUND_SECONDS`. Returns True if it stopped with old jobs still to look at."""
        if self._retention is None:
            return False
        loop = asyncio.get_running_loop()
        started = loop.time()
        deleted = 0
        behind = False
        while True:
            batch = await self._store.prune_finished(self._retention, BATCH, self._after)
            deleted += batch.deleted
            self._after = batch.through
            if self._after is None:
                break
            if loop.time() - started >= ROUND_SECONDS:
                behind = True
                break
        # The bulk actions' records, kept as long as the jobs they changed (their audit
        # records): few, one statement on their own index; an unfinished one stays.
        bulks = await self._store.prune_bulks(self._retention)
        if bulks:
            logger.info("deleted %d bulk action record(s) finished long ago", bulks)
        if deleted:
            logger.info(
                "deleted %d job(s) finished more than %.0f s ago in %.2f s%s",
                deleted,
                self._retention,
                loop.time() - started,
                ", more to delete" if behind else "",
            )
        return behind
