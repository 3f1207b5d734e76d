"""Shutdown: the grace period running jobs get before they are cancelled, the longest a
worker's whole shutdown can take however the database behaves, and connections closed within
a bound. `Worker.stop` runs it; the releases and last writes that follow are the worker's own."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from typing import Protocol
from uuid import UUID

from .._attempt_records import Claim
from ..store._connectivity import worker_statement_timeout
from ..store._protocol import Store
from ._queues import QueueState
from ._threads import JobThreads

logger = logging.getLogger("starlette_jobs.worker")

UNWIND_SECONDS = 0.5
"""How long a cancelled job gets to unwind at shutdown before it is left behind."""
CLOSE_SECONDS = 2.0
"""How long closing the connections may take at the end of a shutdown before they are cut."""


class Closable(Protocol):
    async def close(self) -> None: ...

    def terminate(self) -> None: ...


async def close_in_time(closable: Closable) -> None:
    """Closes `closable` (a store, a listener), or cuts its connections when closing them takes
    longer than `CLOSE_SECONDS`: a database that went silent would hold the shutdown for ever."""
    try:
        await asyncio.wait_for(closable.close(), timeout=CLOSE_SECONDS)
    except TimeoutError:
        closable.terminate()


def shutdown_bound(shutdown_grace: float, lease_duration: float) -> float:
    """The longest a shutdown takes, however the database behaves: the grace period, time for
    cancelled jobs to unwind, one worker statement timeout for the last writes, and the time
    given to closing connections. Documented in docs/workers.md."""
    return (
        shutdown_grace + UNWIND_SECONDS + worker_statement_timeout(lease_duration) + CLOSE_SECONDS
    )


async def give_running_jobs_the_grace(
    running: Mapping[asyncio.Task[None], Claim],
    threads: JobThreads,
    grace: float,
    cancel: Callable[[UUID, asyncio.Task[None]], None],
) -> tuple[list[tuple[int, UUID]], int]:
    """Waits up to `grace` seconds for the running attempts, then cancels the rest and gives
    them `UNWIND_SECONDS` to unwind. Returns (job id, lease token) of the jobs to release, and
    how many attempts are left running behind: a job that ignores cancellation, and one of
    `threads` (the worker's sync jobs') that has not returned, whether its attempt was
    stopped now or timed out before (nothing can stop a thread, and the interpreter waits
    for it at exit)."""
    if not running:
        return [], threads.running()
    logger.info("waiting up to %.1f s for %d running job(s)", grace, len(running))
    _, unfinished = await asyncio.wait(running, timeout=grace)
    for task in unfinished:
        cancel(running[task].lease_token, task)

    def left_behind() -> int:
        return sum(1 for task in unfinished if not task.done()) + threads.running()

    if unfinished:
        # Well-behaved jobs unwind at once; one that ignores cancellation is left behind. A
        # sync job's task ends at once, its thread when the job sees the flag
        # (`current_job().cancel_requested`) and returns: waited for in the same time.
        unwound_by = asyncio.get_running_loop().time() + UNWIND_SECONDS
        await asyncio.wait(unfinished, timeout=UNWIND_SECONDS)
        returned = asyncio.Event()
        with threads.told_when_one_returns(returned.set), contextlib.suppress(TimeoutError):
            async with asyncio.timeout_at(unwound_by):
                while left_behind():
                    returned.clear()
                    await returned.wait()
    # A job that caught the cancellation and returned has its outcome buffered: release only
    # the jobs that are still running or ended cancelled.
    to_release = [
        (running[task].id, running[task].lease_token)
        for task in unfinished
        if not task.done() or task.cancelled()
    ]
    return to_release, left_behind()


async def release_held(store: Store, held: list[tuple[int, UUID]]) -> None:
    """Gives back, at shutdown, the jobs whose attempts did not end within the grace."""
    if not held:
        return
    try:
        released = await store.release_jobs(held)
    except Exception as error:  # shutdown goes on: the leases expire instead
        logger.error(
            "could not release %d job(s) at shutdown (%s); once their lease expires, any "
            "worker runs them again, or fails them if they have no attempt left",
            len(held),
            error,
        )
        return
    logger.info(
        "released %d job(s) (back to pending, or cancelled if asked to stop): %s",
        len(released),
        sorted(released),
    )
    kept = sorted(job_id for job_id, _ in held if job_id not in released)
    if kept:
        logger.warning(
            "%d job(s) not released: another transaction holds their rows locked, or this "
            "worker no longer holds them; once their lease expires, any worker runs them "
            "again, or fails them if they have no attempt left: %s",
            len(kept),
            kept,
        )
    if released:
        # One asked to stop ended cancelled: if it is a workflow's step, the steps waiting for
        # it are told now, not at the next upkeep round of a worker still running.
        try:
            await store.settle_steps()
        except Exception as error:
            logger.warning("could not tell the steps waiting for those released: %s", error)


async def claims_settled(
    claim_loops: Collection[asyncio.Task[None]],
    queues: Iterable[QueueState],
    release_lost_claims: Callable[[QueueState], Awaitable[None]],
) -> None:
    """Waits for the claim loops' claims in flight (their jobs are handed back at once), then
    gives back what a claim that failed lately may have left behind."""
    if claim_loops:
        await asyncio.wait(claim_loops)
    for state in queues:
        if state.reconcile_until is not None:
            try:
                await release_lost_claims(state)
            except Exception as error:  # shutdown goes on: the leases expire instead
                logger.error(
                    "queue %r: could not give back the jobs of a claim whose answer was "
                    "lost (%s); once their lease expires they run again",
                    state.name, error,
                )  # fmt: skip
