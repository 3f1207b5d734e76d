"""The in-memory store's outage switch: for a time, for a number of calls, or until ended, every
call of the store fails with the `DatabaseUnavailableError` that the PostgreSQL store raises when
the database is unavailable, and its listeners are dropped as LISTEN connections are. So the
worker meets an outage as it does on PostgreSQL, and users' tests can exercise their own handling
of one (`starlette_jobs.testing.simulate_outage`) without a server.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Protocol, TypeVar

from .._errors import DatabaseUnavailableError

# The `Store` methods that reach the database: every one fails during an outage. Not
# `expire_connections`, `close` and `terminate`, which work without it on PostgreSQL too.
STORE_CALLS = (
    *("migrate", "check_schema", "insert_jobs", "reserve_ids", "insert_reserved"),
    *("claim_batch", "record_outcomes", "extend_leases", "record_progress", "release_jobs"),
    *("locked_jobs", "complete_job"),
    *("release_unknown_claims", "rescue_expired", "prune_finished", "count_unfinished"),
    *("listen", "listen_for_outcomes", "want_outcome", "get_job", "list_jobs"),
    *("count_by_status", "job_status", "cancel_job", "peek_jobs", "job_events", "retry_job"),
    *("release_job", "release_worker_jobs"),
    *("declare_schedules", "list_schedules", "record_tick", "start_waiting_tick"),
    *("schedule_ticks", "prune_ticks"),
    *("set_paused", "declare_queues", "queue_controls", "claim_limited_batch", "wake_queues"),
    *("register_worker", "worker_seen", "unregister_worker", "list_workers", "prune_workers"),
    *("worker_schedules",),
    *("hold_liveness", "lockless_workers", "rescue_dead_workers", "unrunnable_jobs"),
    *("insert_workflow", "settle_steps", "upstream_results", "get_workflow", "cancel_workflow"),
    *("workflow_of", "add_steps"),
    *("queue_depths",),
    *("begin_bulk", "bulk_batch", "get_bulk", "list_bulks", "prune_bulks"),
    *("status_counts",),
    *("list_workflows",),
    *("add_throughput", "throughput"),
)

StoreClass = TypeVar("StoreClass", bound=type)
clock = time.monotonic  # a test's to replace, not the event loop's clock


class Outaged(Protocol):
    """What an outage needs of the data it makes unavailable (`MemoryData`)."""

    outage: SimulatedOutage | None

    def drop_listeners(self) -> None:
        """Drops every listener, as PostgreSQL drops its LISTEN connections."""
        ...


class SimulatedOutage:
    """An outage of an in-memory store, from `starlette_jobs.testing.simulate_outage`: it
    begins as it is made.

    It lasts for `calls` failed calls, for `seconds`, or (with neither) until `end()`; used as
    a context manager, it ends with the block at the latest.
    """

    def __init__(self, data: Outaged, calls: int | None, seconds: float | None) -> None:
        if calls is not None and seconds is not None:
            raise ValueError("an outage lasts for a number of calls or for a time, not both")
        if calls is not None and (type(calls) is not int or calls < 1):
            raise ValueError(f"calls must be a positive integer, got {calls!r}")
        if seconds is not None and not 0 < seconds < math.inf:
            raise ValueError(f"seconds must be a positive number, got {seconds!r}")
        self._data = data
        self._calls_left = math.inf if calls is None else calls
        self._until = math.inf if seconds is None else clock() + seconds
        self.failed: list[str] = []
        """The store's calls that failed, by name (`insert_jobs`, `claim_batch`...), in order."""
        # Begins at once: calls fail from now on (another outage of the store ends); every
        # listener is dropped, as PostgreSQL's LISTEN connections are: their `alive` says so,
        # and they are opened again once the outage has ended.
        data.outage = self
        data.drop_listeners()

    @property
    def active(self) -> bool:
        """Whether calls fail now."""
        if self._data.outage is not self:
            return False
        if self._calls_left > 0 and clock() < self._until:
            return True
        self.end()
        return False

    def end(self) -> None:
        """Calls succeed again (idempotent)."""
        if self._data.outage is self:
            self._data.outage = None

    def _fail(self, call: str) -> None:
        """Raises `DatabaseUnavailableError` for the store's `call`, if the outage goes on."""
        if not self.active:
            return
        self._calls_left -= 1
        self.failed.append(call)
        raise DatabaseUnavailableError(
            f"the in-memory store is unavailable ({call}): an outage simulated by "
            "starlette_jobs.testing.simulate_outage"
        )

    def __enter__(self) -> SimulatedOutage:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.end()


def failing_in_outages(store_class: StoreClass) -> StoreClass:
    """Makes each of `STORE_CALLS` of `store_class` (whose instances keep their `MemoryData`
    as `data`) fail while an outage of their data is simulated."""
    for name in STORE_CALLS:
        setattr(store_class, name, _failing_in_outages(getattr(store_class, name), name))
    return store_class


def _failing_in_outages(
    method: Callable[..., Coroutine[Any, Any, Any]], name: str
) -> Callable[..., Coroutine[Any, Any, Any]]:
    @functools.wraps(method)
    async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        outage: SimulatedOutage | None = self.data.outage
        if outage is not None:
            outage._fail(name)
        return await method(self, *args, **kwargs)

    return call
