"""A job that runs until its test lets it end, and a record of what its copies did."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from starlette_jobs import Retry, current_job, job


@dataclass
class Runs:
    """What the job bodies of one test did, in order, and how many ran at once at most."""

    events: list[tuple[str, str, int]] = field(default_factory=list)
    happenings: dict[tuple[str, str, int], asyncio.Event] = field(default_factory=dict)
    gates: dict[tuple[str, int], asyncio.Event] = field(default_factory=dict)
    running: int = 0
    peak: int = 0

    def record(self, event: str, key: str, run: int) -> None:
        self.events.append((event, key, run))
        self.happened(event, key, run).set()

    def happened(self, event: str, key: str, run: int) -> asyncio.Event:
        return self.happenings.setdefault((event, key, run), asyncio.Event())

    def gate(self, key: str, run: int) -> asyncio.Event:
        """Set it to let the `run`-th run of `key` end."""
        return self.gates.setdefault((key, run), asyncio.Event())

    def count(self, event: str, key: str) -> int:
        return sum(1 for e, k, _ in self.events if (e, k) == (event, key))

    async def wait_for(self, event: str, key: str, run: int) -> None:
        async with asyncio.timeout(10):
            await self.happened(event, key, run).wait()


runs = Runs()


def reset() -> Runs:
    """A clean record for a new test (the same object: importers keep their reference)."""
    runs.__init__()  # type: ignore[misc]
    return runs


@job(retry=Retry.fixed(max_attempts=3, delay=0))
async def held_open(key: str) -> str:
    """Runs until the test opens this run's gate; the n-th run of `key` is run n."""
    run = runs.count("start", key)
    runs.running += 1
    runs.peak = max(runs.peak, runs.running)
    runs.record("start", key, run)
    try:
        await runs.gate(key, run).wait()
    except asyncio.CancelledError:
        runs.record("cancelled", key, run)
        raise
    finally:
        runs.running -= 1
    runs.record("done", key, run)
    me = current_job()
    assert me is not None
    return f"{key} run {run}, attempt {me.attempt}"
