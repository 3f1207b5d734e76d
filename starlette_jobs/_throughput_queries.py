"""`ThroughputQueries`: the part of `Jobs` that reads the workers' counts of the attempts they
ended, per queue and minute (`jobs.throughput`, docs/dashboard.md), over whatever `Store` the
`Jobs` it belongs to has started."""

from __future__ import annotations

import builtins
from datetime import UTC, datetime, timedelta

from ._errors import unavailable_as_error
from ._storable import filter_text
from ._throughput_records import THROUGHPUT_KEPT_MINUTES, ThroughputMinute, minute_start
from .store._protocol import Store


class ThroughputQueries:
    """The part of `Jobs` that reads the throughput; `Jobs` supplies `_ready_store`."""

    @property
    def _ready_store(self) -> Store:
        raise NotImplementedError

    async def throughput(
        self, minutes: int = 15, *, queue: str | None = None
    ) -> builtins.list[ThroughputMinute]:
        """The attempts the workers ended in each of the last `minutes` minutes (this one
        included; 1 to 60), per queue, added up over every worker on this database: by queue,
        then minute, a minute in which nothing ended left out. Each worker counts in memory
        and writes its counts every 10 seconds, at the end of a drain and when it stops, so
        the last seconds may be missing; a job failed by the upkeep after its worker died is
        not counted, nor a cancelled attempt (docs/dashboard.md, "Throughput").

        ```python
        for minute in await jobs.throughput(5, queue="emails"):
            print(minute.minute, minute.succeeded, minute.failed, minute.retried)
        ```
        """
        if not 1 <= minutes <= THROUGHPUT_KEPT_MINUTES:
            raise ValueError(
                f"minutes must be 1 to {THROUGHPUT_KEPT_MINUTES} (the counts kept), got {minutes!r}"
            )
        filter_text(queue, "queue")
        since = minute_start(datetime.now(UTC)) - timedelta(minutes=minutes - 1)
        with unavailable_as_error("read the throughput"):
            return await self._ready_store.throughput(since, queue)
