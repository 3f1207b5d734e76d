"""What a worker tracks about the attempts it runs: one entry per lease token, never per job id.

The same job can come back to the same worker (after `jobs.release`, or a rescue while the
worker was frozen) while a stale copy of it still runs there. Keyed by job id, the second claim
would overwrite the first: the stale copy would never be cancelled, its end would delete the new
copy's entry, and the new copy's lease would go unrenewed. Keyed by lease token, each attempt
keeps its own entry, and a stale copy counts against its queue's concurrency until it ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Generic, TypeVar
from uuid import UUID

from .._attempt_records import Claim

Handle = TypeVar("Handle")
"""What runs the attempt: the worker's asyncio task (anything, in tests)."""


class RunningAttempts(Generic[Handle]):
    """The attempts running now, each under its claim's lease token, with per-queue limits."""

    def __init__(self, concurrency: Mapping[str, int]) -> None:
        self._concurrency = dict(concurrency)
        self._by_queue: dict[str, dict[UUID, tuple[Handle, Claim]]] = {
            queue: {} for queue in concurrency
        }

    def free(self, queue: str) -> int:
        """How many more attempts `queue` may run now."""
        return self._concurrency[queue] - len(self._by_queue[queue])

    def count(self, queue: str | None = None) -> int:
        if queue is not None:
            return len(self._by_queue[queue])
        return sum(len(attempts) for attempts in self._by_queue.values())

    def start(self, claim: Claim, handle: Handle) -> None:
        attempts = self._by_queue[claim.queue]
        if claim.lease_token in attempts:
            raise RuntimeError(f"job {claim.id}: lease token {claim.lease_token} claimed twice")
        attempts[claim.lease_token] = (handle, claim)

    def end(self, claim: Claim) -> None:
        del self._by_queue[claim.queue][claim.lease_token]

    def handle(self, token: UUID) -> Handle | None:
        found = self.get(token)
        return None if found is None else found[0]

    def get(self, token: UUID) -> tuple[Handle, Claim] | None:
        """The attempt running under `token`, with its claim; None if none is."""
        for attempts in self._by_queue.values():
            if token in attempts:
                return attempts[token]
        return None

    def held(self) -> list[tuple[int, UUID]]:
        """(job id, lease token) of every attempt: the leases to renew."""
        return [
            (claim.id, token)
            for attempts in self._by_queue.values()
            for token, (_, claim) in attempts.items()
        ]

    def claims(self) -> dict[Handle, Claim]:
        return {
            handle: claim
            for attempts in self._by_queue.values()
            for handle, claim in attempts.values()
        }
