"""Queues as `Jobs(queues=...)` declares them (`Queue`: this process's concurrency and the limits
every worker obeys) and as the database keeps them (`QueueControls`: paused or not, and the
limits the last worker to start declared)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ._errors import JobDefinitionError

MAX_CONCURRENCY = 10_000
"""The most jobs of one queue that one process, or all of them (`global_limit`), may run."""

MIN_RATE_PERIOD = 0.01
MAX_RATE_PERIOD = 86_400.0

KEY_LIMIT_SCAN = 1000
"""How many due jobs, in claim order, the claim of a queue with a `key_limit` looks at: the
claim stays bounded however long the queue, at the price that jobs further down wait while
the first ones all belong to keys at their limit."""


def _check_count(name: str, value: int | None) -> None:
    # A bool is an int to Python, and almost certainly a mistake here.
    if value is not None and (type(value) is not int or not 1 <= value <= MAX_CONCURRENCY):
        raise JobDefinitionError(
            f"{name} must be None or a positive integer, at most {MAX_CONCURRENCY}, got {value!r}"
        )


@dataclass(frozen=True, slots=True)
class QueueLimits:
    """What every worker of a queue obeys, wherever it runs (see docs/limits.md).

    `global_limit`: at most this many of the queue's jobs run at once across all workers;
    None: no limit but each worker's own concurrency. `key`, `key_limit`: at most `key_limit`
    of its jobs run at once with the same value of their argument `key` (jobs without that
    argument are not limited by it); None: no such limit. `rate_limit`, `rate_period`: at most
    `rate_limit` of its jobs start in any `rate_period` seconds; None: no such limit.
    """

    global_limit: int | None = None
    key: str | None = None
    key_limit: int | None = None
    rate_limit: int | None = None
    rate_period: float = 1.0

    def __post_init__(self) -> None:
        _check_count("global_limit", self.global_limit)
        _check_count("key_limit", self.key_limit)
        _check_count("rate_limit", self.rate_limit)
        period: object = self.rate_period
        if (
            isinstance(period, bool)
            or not isinstance(period, int | float)
            or not MIN_RATE_PERIOD <= period <= MAX_RATE_PERIOD  # NaN fails it too
        ):
            raise JobDefinitionError(
                f"rate_period must be a number of seconds from {MIN_RATE_PERIOD} to "
                f"{MAX_RATE_PERIOD:.0f}, got {period!r}"
            )
        if (self.key is None) != (self.key_limit is None):
            raise JobDefinitionError(
                "key and key_limit go together: name the argument (key=) and how many jobs "
                f"may run per value of it (key_limit=), got key={self.key!r}, "
                f"key_limit={self.key_limit!r}"
            )
        if self.key is not None and not (isinstance(self.key, str) and self.key.isidentifier()):
            raise JobDefinitionError(
                f"key must be the name of an argument of the queue's jobs, got {self.key!r}"
            )

    @property
    def limited(self) -> bool:
        """Whether a claim must count the queue's running jobs (a claim of its own)."""
        return any(x is not None for x in (self.global_limit, self.key_limit, self.rate_limit))


@dataclass(frozen=True, slots=True)
class Queue:
    """A queue of `Jobs(queues=...)`: how many of its jobs run at once in this process, and
    the limits every worker of the queue obeys.

    Args:
        concurrency: how many of its jobs this process runs at once (1 to 10,000); what a bare
            int in `queues=` means.
        global_limit: at most this many of its jobs run at once across every worker process
            (1 to 10,000); None (default): no limit but each process's `concurrency`.
        key: the name of an argument of the queue's jobs, read from each job's stored
            arguments (whoever enqueued it), for `key_limit`.
        key_limit: at most this many of its jobs run at once, across every worker process,
            with the same value of the argument `key` (1 to 10,000); None (default): no limit.
        rate_limit: at most this many of its jobs start in any `rate_period` seconds, across
            every worker process (1 to 10,000); None (default): no limit.
        rate_period: the length of that window, in seconds (0.01 to 86,400; default 1).

    Example:
        >>> Jobs(queues={"default": 10, "exports": Queue(concurrency=10, global_limit=4)})
        >>> Jobs(queues={"sync": Queue(key="customer_id", key_limit=1)})
        >>> Jobs(queues={"sms": Queue(rate_limit=10, rate_period=1.0)})
    """

    concurrency: int = 10
    global_limit: int | None = None
    key: str | None = None
    key_limit: int | None = None
    rate_limit: int | None = None
    rate_period: float = 1.0
    limits: QueueLimits = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if type(self.concurrency) is not int or not 1 <= self.concurrency <= MAX_CONCURRENCY:
            raise JobDefinitionError(
                f"concurrency must be a positive integer, at most {MAX_CONCURRENCY}, "
                f"got {self.concurrency!r}"
            )
        limits = QueueLimits(
            self.global_limit, self.key, self.key_limit, self.rate_limit, self.rate_period
        )
        object.__setattr__(self, "limits", limits)


@dataclass(frozen=True, slots=True)
class QueueControls:
    """A queue as the database keeps it: `jobs.queue_controls(name)`.

    `paused`: `jobs.pause(name)` was called, and no `jobs.resume(name)` since: no worker claims
    its jobs. `limits`: what the last worker to start on the queue declared (see `Queue`).
    """

    name: str
    paused: bool = False
    limits: QueueLimits = QueueLimits()


def as_queue(declared: int | Queue) -> Queue:
    """A queue of `queues=`: a bare int is its concurrency."""
    return declared if isinstance(declared, Queue) else Queue(concurrency=declared)


def declared_queues(queues: Mapping[str, int | Queue]) -> dict[str, Queue]:
    """The queues of `Jobs(queues=...)`, each as a `Queue`."""
    return {name: as_queue(declared) for name, declared in queues.items()}
