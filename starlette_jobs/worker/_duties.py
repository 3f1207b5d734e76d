"""What a worker does for every worker that shares its database, besides running its own jobs:
the upkeep (rescues of expired leases, retention, `_upkeep.py`), the periodic jobs' ticks
(`_ticker.py`), the queues' gauges (`_depths.py`), and the names of jobs no worker knows
(`_strays.py`). Each runs in a task of its own; they start once the worker claims, and stop
after its attempts are over."""

from __future__ import annotations

from collections.abc import Callable

from .._job import registered_names
from .._metrics import Metrics
from .._schedules import registered_schedules
from ..store._protocol import Store
from ._depths import DepthReporter
from ._settings import WorkerSettings
from ._strays import Strays, strays_interval
from ._ticker import Ticker
from ._upkeep import Upkeep


class SharedDuties:
    def __init__(
        self,
        store: Store,
        settings: WorkerSettings,
        worker_id: str,
        metrics: Metrics,
        wake: Callable[[str], None],
        paused: Callable[[str], bool],
    ) -> None:
        queues = list(settings.queues)
        self.upkeep = Upkeep(store, settings.lease_duration / 3, settings.retention, wake, metrics)
        self.ticker = Ticker(store, registered_schedules(), worker_id, metrics=metrics)
        # The queues' gauges, read by one worker of those sharing the database.
        self.depths = DepthReporter(store, worker_id, metrics, settings.lease_duration / 3)
        # Which job names it claims: those it declares, and strays (docs/workers.md).
        self.strays = Strays(
            store, queues, registered_names, settings.unknown_job_grace,
            strays_interval(settings.lease_duration, settings.unknown_job_grace), wake, paused,
        )  # fmt: skip

    def start(self) -> None:
        self.upkeep.start()
        self.strays.start()
        self.ticker.start()
        self.depths.start()

    async def stop(self) -> None:
        await self.upkeep.stop()
        await self.strays.stop()
        await self.ticker.stop()
        await self.depths.stop()
