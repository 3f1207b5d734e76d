"""The schedules a worker's code declares (`@periodic`), and writing them to the store for its
ticker (`_ticker.py`): the code's whole set at its start, which deletes the schedules that code
no longer has; a schedule declared later (a module imported late) only added; and this code's
definitions written again over those of code no live worker runs any more."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from .._schedule_records import StoredSchedule
from .._schedules import Schedule
from ..store._protocol import Store
from ._schedule_holders import as_declared

logger = logging.getLogger("starlette_jobs.worker")


class Declarations:
    """`schedules`: those the ticker ticks, by name the latest declared; `hashes`: their
    definitions' hashes, by name. `declared()` gives the process's declarations, read again
    before each round (`follow`)."""

    def __init__(
        self,
        store: Store,
        schedules: Sequence[Schedule],
        declared: Callable[[], Sequence[Schedule]],
    ) -> None:
        self._store = store
        self.schedules = list(schedules)
        self.hashes = {s.name: s.declared().definition_hash for s in self.schedules}
        # A handful of schedules, compared one by one by identity (`Schedule` has no `__eq__`
        # of its own) before each round: cheap, and it sees the registry changed in place too.
        self._declared = declared
        self._seen = list(declared())
        self._written = False
        # The first declaration is the code's whole set (the store deletes the rest); after it,
        # or if the process declared none at its start, one only adds (see `write`).
        self._adds_only = not self.schedules

    def changed(self) -> bool:
        """Whether the process declared a schedule (or declared one again) since `follow`."""
        return list(self._declared()) != self._seen

    def follow(self) -> None:
        """Takes in the schedules declared (or declared again) since the last round."""
        if not self.changed():
            return
        self._seen = list(self._declared())
        known = {schedule.name: schedule for schedule in self.schedules}
        added = [s for s in self._seen if known.get(s.name) is not s]
        for schedule in added:
            known[schedule.name] = schedule
            self.hashes[schedule.name] = schedule.declared().definition_hash
        self.schedules = list(known.values())
        if added:
            self._written = False  # written at this round
            logger.info("schedules declared since the start: %s", [s.name for s in added])

    async def write(self) -> None:
        """Writes the schedules to the store, unless written since they last changed."""
        if self._written:
            return
        ours = [s.declared() for s in self.schedules]
        if self._adds_only:
            # At its start a worker's code declares every schedule and the store deletes the
            # rest (removed by newer code); one declared later only adds, or the fleet's newer
            # schedules would be deleted by an older worker that imported a module late.
            names = {schedule.name for schedule in ours}
            ours += [
                as_declared(row)
                for row in await self._store.list_schedules()
                if row.name not in names
            ]
        await self._store.declare_schedules(ours)
        self._written = self._adds_only = True
        logger.info("schedules declared: %s", [s.name for s in self.schedules])

    async def write_again(self, names: Sequence[str], stored: Mapping[str, StoredSchedule]) -> None:
        """Writes this code's definitions of `names` (their stored form is held by no live
        worker: an old worker restarted during a rolling deploy, say, and stopped), and
        leaves the other stored schedules as they are. They tick again without waiting for
        a restart of this worker."""
        logger.warning(
            "schedules %s are defined otherwise in the database, by code no live worker "
            "runs: declaring this code's definitions again",
            list(names),
        )
        ours = [s.declared() for s in self.schedules if s.name in names]
        kept = [as_declared(row) for row in stored.values() if row.name not in names]
        await self._store.declare_schedules([*ours, *kept])
