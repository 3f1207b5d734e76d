"""Stopping the attempts a worker runs (`AttemptStops`): for the worker's own reasons (shutdown,
a lost lease), or because `jobs.cancel` asked. A task is cancelled only once it has started
(before that, the stop is a mark the attempt reads as it starts), and a cancel request that
overtakes the claim's answer is remembered until the claim is seen."""

from __future__ import annotations

import asyncio
import logging
from uuid import UUID

from .._errors import UnknownJobError
from .._job import registered_job
from ._attempt import CANCEL_REQUESTED
from ._context import AttemptControl
from ._running import RunningAttempts

logger = logging.getLogger("starlette_jobs.worker")


def cancel_started(
    task: asyncio.Task[None], control: AttemptControl | None, message: str | None = None
) -> None:
    """Cancels an attempt's task once it has started. A task cancelled before its first step
    never runs its coroutine, so the attempt's clean-up (its bookkeeping, its outcome) would
    never run either: until then the stop stays a mark on `control`, which the attempt reads
    as it starts."""
    if control is None or control.started:
        task.cancel(message)


class EarlyCancels:
    """Lease tokens whose cancel request came before this worker knew the token: a claim
    commits before its answer reaches the worker, and `jobs.cancel`'s notification, on another
    connection, can arrive first. Kept `horizon` seconds (the longest a claim's answer can
    take: a statement timeout), so that every worker remembering every other worker's requests
    stays small; the heartbeat catches a request that comes later still."""

    def __init__(self, horizon: float) -> None:
        self.drain_horizon = horizon
        self._received: dict[UUID, float] = {}

    def add(self, token: UUID) -> None:
        now = asyncio.get_running_loop().time()
        # Oldest first (insertion order): drop those past the horizon.
        while self._received:
            oldest, at = next(iter(self._received.items()))
            if now - at <= self.drain_horizon:
                break
            del self._received[oldest]
        self._received[token] = now

    def pop(self, token: UUID) -> bool:
        """Whether a cancel request for `token` came (and is still remembered); forgets it."""
        return self._received.pop(token, None) is not None


def is_async_job(name: str) -> bool:
    """Whether the job named `name` runs on the event loop, where a cancel can stop it (a sync
    job runs in a thread, which nothing can interrupt)."""
    try:
        return registered_job(name).is_async
    except UnknownJobError:
        return True  # never started: nothing runs in a thread


class AttemptStops:
    """What the worker shares with each running attempt, by lease token (`AttemptControl`:
    whether a cancel was requested, whether the worker cancelled it for itself, its progress),
    and the ways an attempt is stopped."""

    def __init__(self, running: RunningAttempts[asyncio.Task[None]], horizon: float) -> None:
        self._running = running
        self._controls: dict[UUID, AttemptControl] = {}
        self._early = EarlyCancels(horizon)

    def register(self, token: UUID, control: AttemptControl) -> None:
        """An attempt starts under `token`; a cancel request that came first applies now."""
        if self._early.pop(token):
            control.request_cancel()  # the attempt ends cancelled as it starts
        self._controls[token] = control

    def forget(self, token: UUID) -> None:
        del self._controls[token]

    def lost(self, job_id: int, token: UUID) -> None:
        """The job is no longer held under this attempt's token: another worker may be running
        it now, so stop this copy's side effects early."""
        control = self._controls.get(token)
        if control is not None and control.completed:
            # It wrote its own success (`complete_in`): the lease ended with it, as it should.
            return
        attempt = self._running.handle(token)
        logger.warning(
            "job %s: this worker no longer holds its lease (it expired and the job was "
            "rescued, or it was released)%s",
            job_id, "; cancelling this worker's attempt" if attempt else "",
        )  # fmt: skip
        if attempt is not None:
            self.cancel(token, attempt)

    def stop_all_but_threads(self, worker_id: str) -> list[tuple[int, UUID]]:
        """Cancels every running attempt but a started sync job's, for the worker's own
        reasons (its liveness lock was lost); returns the (job id, token) of those cancelled.

        A sync job's thread cannot be stopped: given back, its job would run a second time
        beside it (a restart of the server frees every lock, and each worker takes its own
        again within a second). Kept, its lease renewed, it runs to its end once; its outcome
        is refused only if another worker took the job meanwhile."""
        stopped, kept = [], []
        for job_id, token in self._running.held():
            if self.in_a_thread(token):
                kept.append(job_id)
                continue
            attempt = self._running.handle(token)
            if attempt is not None:
                self.cancel(token, attempt)
            stopped.append((job_id, token))
        if kept:
            logger.warning(
                "worker %s: the sync jobs %s run on in their threads, which cannot be stopped: "
                "their jobs are kept, not given back", worker_id, sorted(kept),
            )  # fmt: skip
        return stopped

    def in_a_thread(self, token: UUID) -> bool:
        """Whether the attempt under `token` is a sync job's that has started: its thread runs
        on whatever is cancelled, until the job returns."""
        control = self._controls.get(token)
        attempt = self._running.get(token)
        return (
            control is not None
            and control.started
            and attempt is not None
            and not is_async_job(attempt[1].name)
        )

    def cancel(self, token: UUID, task: asyncio.Task[None]) -> None:
        """Cancels an attempt for the worker's own reasons (shutdown, a lost lease)."""
        control = self._controls.get(token)
        if control is not None:
            control.stopped_by_worker = True
        cancel_started(task, control)

    def requested(self, token: UUID) -> None:
        """`jobs.cancel` asked a running job to stop (told by NOTIFY, or by the heartbeat if
        that was lost). If this worker runs the attempt that holds `token`, it stops it now: an
        async job is cancelled; a sync job's thread cannot be, it sees the flag
        (`current_job().cancel_requested`). Any other token is another worker's."""
        control = self._controls.get(token)
        attempt = self._running.get(token)
        if control is None or attempt is None:
            # Not (yet) an attempt of this worker's: the notification may have overtaken the
            # answer to the claim that holds the token (see `EarlyCancels`).
            self._early.add(token)
            return
        if not control.request_cancel():
            return
        task, claim = attempt
        if is_async_job(claim.name):
            logger.info("job %s (%s): cancel requested, cancelling it", claim.id, claim.name)
            cancel_started(task, control, CANCEL_REQUESTED)
        else:
            logger.info(
                "job %s (%s): cancel requested; it runs in a thread, which cannot be "
                "interrupted: it ends when it returns",
                claim.id, claim.name,
            )  # fmt: skip
