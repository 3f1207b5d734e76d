"""Retry policies: pure functions from the attempt that just failed to the delay before the next.

A policy never sleeps and never looks at a clock; the worker asks it once per failed attempt and
stores the answer as the row's next `run_at`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ._errors import JobDefinitionError
from ._storable import MAX_DELAY

_MAX_ATTEMPTS = 2**31 - 1  # stored in an `integer` column

RandomFraction = Callable[[], float]
"""Returns a float in [0, 1); `random.random` unless a test passes its own."""


@dataclass(frozen=True, slots=True)
class Retry:
    """When a failed job runs again, and how many times it may run in all.

    Build one with `Retry.fixed`, `Retry.exponential` or `Retry.none`.

    Example:
        >>> Retry.fixed(max_attempts=3, delay=2.0).next_delay(1)
        2.0
        >>> Retry.fixed(max_attempts=3, delay=2.0).next_delay(3) is None
        True
    """

    kind: Literal["fixed", "exponential", "none"]
    max_attempts: int
    base_delay: float = 0.0
    max_delay: float = 0.0
    jitter: float = 0.0

    def __post_init__(self) -> None:
        # JobDefinitionError is a ValueError, which these raised before it existed.
        if type(self.max_attempts) is not int or not 1 <= self.max_attempts <= _MAX_ATTEMPTS:
            raise JobDefinitionError(
                f"max_attempts must be an integer from 1 to {_MAX_ATTEMPTS}, "
                f"got {self.max_attempts!r}"
            )
        for delay in (self.base_delay, self.max_delay):
            # The delay becomes a timestamp in the row: one PostgreSQL cannot hold would keep
            # the failed attempt from being recorded at all.
            if (
                isinstance(delay, bool)
                or not isinstance(delay, int | float)
                or not (0 <= delay <= MAX_DELAY)
            ):
                raise JobDefinitionError(
                    "retry delays must be finite numbers of seconds >= 0 and at most "
                    f"{MAX_DELAY:.0f} (10 years), got {delay!r}"
                )
        if not 0.0 <= self.jitter <= 1.0:
            raise JobDefinitionError(
                f"jitter is a fraction of the delay in [0, 1], got {self.jitter}"
            )

    @classmethod
    def fixed(cls, max_attempts: int = 3, delay: float = 1.0, *, jitter: float = 0.0) -> Retry:
        """The same `delay` (seconds) before every retry, `max_attempts` runs in all."""
        return cls("fixed", max_attempts, base_delay=delay, max_delay=delay, jitter=jitter)

    @classmethod
    def exponential(
        cls,
        max_attempts: int = 5,
        base_delay: float = 1.0,
        max_delay: float = 300.0,
        jitter: float = 0.1,
    ) -> Retry:
        """`base_delay * 2 ** (attempt - 1)` seconds, capped at `max_delay`, less up to `jitter`.

        Jitter takes a random share of at most `jitter` off the delay, so many jobs that failed
        together do not all come back at the same instant, and the cap is never exceeded.
        """
        return cls("exponential", max_attempts, base_delay, max(base_delay, max_delay), jitter)

    @classmethod
    def none(cls) -> Retry:
        """Run once; a failure is final."""
        return cls("none", 1)

    def next_delay(
        self, attempt: int, random_fraction: RandomFraction = random.random
    ) -> float | None:
        """Seconds to wait before the attempt after `attempt` (1-based), or None to give up."""
        if attempt >= self.max_attempts:
            return None
        return self._delay_after(attempt, random_fraction)

    def _delay_after(self, attempt: int, random_fraction: RandomFraction = random.random) -> float:
        """Seconds to wait after `attempt` (1-based) failed, whatever the attempts left: for a
        job whose row allows more attempts than this policy (declared with more, lowered since).
        """
        if self.kind == "exponential":
            # min() before the power would overflow for large attempt numbers.
            exponent = min(attempt - 1, 64)
            delay = min(self.base_delay * 2.0**exponent, self.max_delay)
        else:
            delay = self.base_delay
        return delay * (1.0 - self.jitter * random_fraction())


def delay_after_failure(
    policy: Retry,
    attempt: int,
    max_attempts: int,
    error: BaseException,
    non_retryable: tuple[type[BaseException], ...] = (),
) -> float | None:
    """The whole retry decision for an attempt that failed with `error`: seconds until the next
    attempt, or None to fail the job for good. `max_attempts` is the row's (the policy's when
    the job was enqueued), which wins over a policy changed since.

    Example:
        >>> delay_after_failure(Retry.fixed(max_attempts=3, delay=2.0), 1, 3, ValueError())
        2.0
        >>> delay_after_failure(Retry.fixed(3, 2.0), 1, 3, KeyError(), non_retryable=(KeyError,))
    """
    if isinstance(error, non_retryable) or attempt >= max_attempts:
        return None
    return policy._delay_after(attempt)
