"""Liveness (`worker/_liveness.py`) on the in-memory store: a lost lock stops the worker's
attempts at once, is taken again, and the stopped attempts' jobs are given back; rescue wakes
the queues it gave jobs back to. Killed and frozen processes on PostgreSQL:
processes/test_registry.py."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from starlette_jobs import DatabaseUnavailableError, JobStatus
from starlette_jobs._metrics import Metrics
from starlette_jobs._tracing import Tracing
from starlette_jobs._worker_records import NewWorker
from starlette_jobs._workflow_records import NewStep, NewWorkflow
from starlette_jobs.memory._rows import QueueListener
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.worker._leases import Held
from starlette_jobs.worker._liveness import Liveness, liveness_interval
from starlette_jobs.worker._upkeep import Wakeups
from starlette_jobs.worker._worker import Worker
from tests.conftest import eventually
from tests.records import new_jobs
from tests.test_metrics import points
from tests.worker.test_upkeep import NoListen
from tests.worker.test_worker import Gate, at_least, enqueue, settings
from tests.worker.test_worker import gate as gate  # a fixture

SEEN = datetime(2026, 1, 1, tzinfo=UTC)
"""When the fakes' lockless peers last wrote their row: never since."""


class Cut:
    """A lock whose connection was lost."""

    async def alive(self, timeout: float) -> bool:
        return False

    async def close(self) -> None:
        pass

    def terminate(self) -> None:
        pass


class Flaky(MemoryStore):
    """Hands out a lost lock first, then good ones; counts how many it handed out."""

    held = 0

    async def hold_liveness(self, worker_id: str) -> Cut:  # type: ignore[override]
        self.held += 1
        return Cut() if self.held == 1 else await super().hold_liveness(worker_id)  # type: ignore[return-value]


class PeerWithoutItsLock(Flaky):
    """A registered peer whose lock is always free; records what each rescue asked for (the
    workers it was limited to)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[list[str] | None] = []

    async def lockless_workers(self, excluding: str | None = None) -> dict[str, datetime]:
        return {"peer": SEEN}

    async def rescue_dead_workers(
        self, limit: int, excluding: str | None = None, among: Mapping[str, datetime] | None = None
    ) -> list[tuple[int, str, JobStatus]]:
        self.asked.append(None if among is None else list(among))
        return []


async def _nothing() -> None:
    pass


def _still() -> None:
    pass


def test_checks_run_every_second_or_a_third_of_a_short_lease() -> None:
    assert liveness_interval(60.0) == 1.0
    assert liveness_interval(1.5) == 0.5


async def test_a_lost_lock_stops_every_attempt_and_gives_their_jobs_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = Flaky()
    await store.insert_jobs(new_jobs(2, queue="q"))
    claims = await store.claim_batch("q", 2, "w", 60.0)
    stopped: list[Held] = []

    def stop_attempts() -> Held:
        held = [(claim.id, claim.lease_token) for claim in claims]
        stopped.append(held)
        return held

    regained: list[bool] = []

    async def register_again() -> None:
        regained.append(liveness.held)

    resumed: list[list[JobStatus | None]] = []

    def resume() -> None:
        resumed.append([store.data.rows[claim.id].status for claim in claims])

    liveness = Liveness(
        store, "w", 1.0, 1.0, stop_attempts, lambda queue: None, register_again, resume
    )
    await liveness.start()
    with caplog.at_level(logging.WARNING, logger="starlette_jobs.worker"):
        await liveness.check()
    assert len(stopped) == 1  # at once, before the lock is taken again
    assert regained == [False]  # the row is written before the worker may claim again
    # The claim loops are woken once the jobs are given back, so that their claim finds them.
    assert resumed == [[JobStatus.PENDING, JobStatus.PENDING]]
    assert liveness.held
    assert store.held == 2
    for claim in claims:
        assert await store.job_status(claim.id) is JobStatus.PENDING
    ids = sorted(claim.id for claim in claims)
    assert any("lost the connection that holds its liveness lock" in m for m in caplog.messages)
    assert f"worker w: gave back the jobs of the attempts it stopped: {ids}" in caplog.messages
    await liveness.check()  # the new lock answers: nothing more to do
    assert (len(stopped), store.held) == (1, 2)
    await liveness.stop()


async def test_a_rescue_that_finds_no_dead_worker_wakes_nothing() -> None:
    woken: list[str] = []
    liveness = Liveness(MemoryStore(), "w", 1.0, 1.0, list, woken.append, _nothing, _still)
    await liveness.rescue()
    assert woken == []


class CutOff(MemoryStore):
    """Hands out a lost lock, then cannot take it again (the database out of reach)."""

    held = 0

    async def hold_liveness(self, worker_id: str) -> Cut:  # type: ignore[override]
        self.held += 1
        if self.held > 1:
            raise DatabaseUnavailableError("out of reach (test)")
        return Cut()


async def test_a_worker_that_stops_without_its_lock_is_handed_the_jobs_it_stopped() -> None:
    store = CutOff()
    await store.insert_jobs(new_jobs(2, queue="q"))
    claims = await store.claim_batch("q", 2, "w", 60.0)
    liveness = Liveness(
        store, "w", 1.0, 1.0, lambda: [(c.id, c.lease_token) for c in claims], lambda q: None,
        _nothing, _still,
    )  # fmt: skip
    await liveness.start()
    with pytest.raises(DatabaseUnavailableError):
        await liveness.check()
    assert not liveness.held
    await liveness.stop()
    # What the worker's shutdown gives back with the jobs of its running attempts.
    assert liveness.take_unreleased() == [(claim.id, claim.lease_token) for claim in claims]
    assert liveness.take_unreleased() == []


class DeadWorker(MemoryStore):
    """A dead worker's jobs, as `rescue_dead_workers` ends them: those of an expired lease."""

    async def lockless_workers(self, excluding: str | None = None) -> dict[str, datetime]:
        return {"dead": SEEN}

    async def rescue_dead_workers(
        self, limit: int, excluding: str | None = None, among: Mapping[str, datetime] | None = None
    ) -> list[tuple[int, str, JobStatus]]:
        return await self.rescue_expired(limit)


async def test_a_step_a_rescue_fails_tells_its_dependents_at_once() -> None:
    store = DeadWorker()
    first = NewStep(
        step="first", name="tests.a", queue="q", payload="{}", priority=0, max_attempts=1,
        upstream=(), allowed_failures=0,
    )  # fmt: skip
    second = NewStep(
        step="second", name="tests.b", queue="q", payload="{}", priority=0, max_attempts=1,
        upstream=(0,), allowed_failures=0,
    )  # fmt: skip
    enqueued = await store.insert_workflow(NewWorkflow.of("w", (first, second), None))
    await store.claim_batch("q", 10, "dead", 0.0)  # its lease runs out at once
    liveness = Liveness(
        store, "w", 1.0, 1.0, list, lambda queue: None, _nothing, _still, dead_after=0.0
    )
    await liveness.start()
    await liveness.rescue()
    await liveness.stop()
    assert await store.job_status(enqueued.steps["first"]) is JobStatus.FAILED
    # Told now, not at the next upkeep round.
    assert await store.job_status(enqueued.steps["second"]) is JobStatus.CANCELLED


async def test_the_jobs_a_rescue_gives_back_are_counted() -> None:
    class DeadPeer(MemoryStore):
        async def lockless_workers(self, excluding: str | None = None) -> dict[str, datetime]:
            return {"peer": SEEN}

        async def rescue_dead_workers(
            self,
            limit: int,
            excluding: str | None = None,
            among: Mapping[str, datetime] | None = None,
        ) -> list[tuple[int, str, JobStatus]]:
            return [(1, "mail", JobStatus.PENDING), (2, "mail", JobStatus.FAILED)]

    reader = InMemoryMetricReader()
    metrics = Metrics(MeterProvider(metric_readers=[reader]))
    liveness = Liveness(
        DeadPeer(), "w", 1.0, 1.0, list, lambda queue: None, _nothing, _still, metrics,
        dead_after=0.0,
    )  # fmt: skip
    await liveness.start()
    await liveness.rescue()
    await liveness.stop()
    counted = {
        (a["starlette_jobs.job.status"], a["starlette_jobs.reason"]): p.value
        for a, p in points(reader)["starlette_jobs.jobs.rescued"]
    }
    assert counted == {("pending", "worker_dead"): 1, ("failed", "worker_dead"): 1}


class SilentNetwork(Flaky):
    """The network went silent: its first lock and its first LISTEN connection stop answering
    (new ones answer); records in order what the worker does about it."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []
        self.listens = 0

    async def listen(
        self,
        queues: Sequence[str],
        on_notify: Callable[[str], None],
        on_cancel: Callable[[UUID], None] | None = None,
        on_controls: Callable[[str], None] | None = None,
    ) -> QueueListener:
        listener = await super().listen(queues, on_notify, on_cancel, on_controls)
        self.listens += 1
        if self.listens == 1:

            async def silent(timeout: float) -> bool:
                return False

            listener.alive = silent  # type: ignore[method-assign]
        return listener

    async def expire_connections(self) -> None:
        self.seen.append("connections expired")

    async def hold_liveness(self, worker_id: str) -> Cut:  # type: ignore[override]
        if self.held:
            self.seen.append("lock taken again")
        return await super().hold_liveness(worker_id)


async def test_a_silent_network_is_found_on_lock_and_listen_at_once_and_the_lock_taken_first() -> (
    None
):
    store = SilentNetwork()
    seen = store.seen

    async def register_again() -> None:
        seen.append("registered")

    wakeups = Wakeups(store, ["mail", "sms"], lambda queue: seen.append(f"woke {queue}"))
    liveness = Liveness(
        store, "w", 1.0, 1.0, list, lambda queue: None, register_again,
        lambda: seen.append("may claim"), listen=wakeups,
    )  # fmt: skip
    await wakeups.start()
    await liveness.start()
    await liveness.check()
    # One check finds both; no queue is woken (no claim made) before the lock is held again:
    # a job claimed on a new connection meanwhile would be stopped and run again.
    assert seen == [
        "connections expired", "lock taken again", "registered", "may claim",
        "woke mail", "woke sms",
    ]  # fmt: skip
    assert liveness.held
    assert await wakeups.answers(1.0)
    await liveness.check()  # both answer now: nothing more
    assert len(seen) == 6
    await liveness.stop()
    await wakeups.stop()


async def test_a_silent_listen_alone_is_opened_again_and_the_lock_kept() -> None:
    store = SilentNetwork()
    store.held = 1  # its first lock answers
    woken: list[str] = []
    wakeups = Wakeups(store, ["mail"], woken.append)
    liveness = Liveness(
        store, "w", 1.0, 1.0, list, lambda q: None, _nothing, _still, listen=wakeups
    )
    await wakeups.start()
    await liveness.start()
    store.seen.clear()
    await liveness.check()
    assert store.seen == ["connections expired"]  # the lock was not taken again
    assert woken == ["mail"]
    assert liveness.held
    await liveness.stop()
    await wakeups.stop()


async def test_a_workers_rescue_never_takes_its_own_jobs() -> None:
    """Its lock lost a moment ago (ended by an operator), or freed while its check takes it
    again: the worker would look dead to itself, and run its own finished jobs again."""

    excluded: list[str | None] = []

    class Rescues(MemoryStore):
        async def lockless_workers(self, excluding: str | None = None) -> dict[str, datetime]:
            excluded.append(excluding)
            return {"peer": SEEN}

        async def rescue_dead_workers(
            self,
            limit: int,
            excluding: str | None = None,
            among: Mapping[str, datetime] | None = None,
        ) -> list[tuple[int, str, JobStatus]]:
            excluded.append(excluding)
            return []

    store = Rescues()
    liveness = Liveness(
        store, "w", 1.0, 1.0, list, lambda q: None, _nothing, _still, dead_after=0.0
    )
    await liveness.start()
    await liveness.rescue()
    await liveness.stop()
    assert excluded == ["w", "w"]  # the look, then the rescue


async def test_once_it_took_a_lost_lock_again_a_worker_leaves_the_others_time_to_take_theirs() -> (
    None
):
    """What freed its lock (a restart of the server, an operator ending sessions) likely freed
    the others': their rows with a free lock are live workers about to take theirs again, and
    rescuing their jobs then failed the running attempts of live workers."""
    store = PeerWithoutItsLock()
    asked = store.asked
    liveness = Liveness(
        store, "w", 60.0, 1.0, list, lambda q: None, _nothing, _still, settle=0.2,
        dead_after=0.0,
    )  # fmt: skip
    await liveness.start()  # its first lock is lost at once (Flaky)
    await liveness.rescue()
    assert asked == [["peer"]]  # a worker that never lost its lock rescues at once
    await liveness.check()  # finds its lock lost, and takes it again
    assert liveness.held
    await liveness.rescue()
    assert asked == [["peer"]]  # not now

    async def rescued_again() -> bool:
        await liveness.rescue()
        return len(asked) == 2

    await eventually(rescued_again, "a rescue once the others had time to take their locks")
    await liveness.stop()


async def test_a_listen_that_cannot_open_expires_no_connection_at_each_check() -> None:
    """Polling stands in for a LISTEN that failed to open (too many connections, say): replacing
    every connection of the process at each check would add to that overload."""

    store = NoListen()
    wakeups = Wakeups(store, ["q"], lambda queue: None)
    await wakeups.start()  # fails: polling stands in
    liveness = Liveness(
        store, "w", 1.0, 1.0, list, lambda q: None, _nothing, _still, listen=wakeups
    )
    await liveness.start()
    for _ in range(3):
        await liveness.check()  # tries LISTEN again each time
    await liveness.stop()
    await wakeups.stop()
    assert liveness.held
    assert store.expired == 0


class LostAtShutdown(MemoryStore):
    """The liveness lock's connection is lost as the worker deletes its row at shutdown, and a
    registry write, once sent, lands even if its sender is cancelled (as a statement that
    reached the server does), after the deletion."""

    def __init__(self) -> None:
        super().__init__()
        self.stopping = False
        self.lock_cut = False
        self.retaken = asyncio.Event()
        self.deleted = asyncio.Event()
        self.late_writes: list[asyncio.Task[None]] = []

    async def hold_liveness(self, worker_id: str) -> Any:
        if self.stopping:
            self.retaken.set()
        return CutWhen(lambda: self.lock_cut)

    async def register_worker(self, worker: NewWorker) -> None:
        if not self.stopping:
            return await super().register_worker(worker)
        self.late_writes.append(asyncio.ensure_future(self._after_deletion(worker)))
        await asyncio.shield(self.late_writes[-1])

    async def _after_deletion(self, worker: NewWorker) -> None:
        await self.deleted.wait()
        await super().register_worker(worker)

    async def unregister_worker(self, worker_id: str) -> None:
        self.stopping = self.lock_cut = True
        # Time for a liveness check (every 0.5 s with a lease of 1.5 s) to find the lock lost
        # and take it again, within the second shutdown gives this deletion: no check may run
        # any more, so on a sound worker it never comes.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.retaken.wait(), 0.7)
        await super().unregister_worker(worker_id)
        self.deleted.set()


class CutWhen:
    """A liveness lock whose connection answers until `is_cut()` says it was lost."""

    def __init__(self, is_cut: Callable[[], bool]) -> None:
        self._is_cut = is_cut

    async def alive(self, timeout: float) -> bool:
        return not self._is_cut()

    async def close(self) -> None:
        pass

    def terminate(self) -> None:
        pass


async def test_a_lock_lost_as_the_worker_stops_does_not_write_its_row_again() -> None:
    """Once the worker deletes its row at shutdown, no liveness check runs to take a lost lock
    again: that would write the row back after its deletion (a stray row, a worker listed as
    live after it stopped, until another worker's rescue deletes it)."""
    store = LostAtShutdown()
    worker = Worker(store, settings(lease_duration=1.5), Tracing())
    await worker.start()
    assert [w.id for w in await store.list_workers()] == [worker.worker_id]
    await worker.stop()
    await asyncio.gather(*store.late_writes)
    assert await store.list_workers() == []


class CutOnDemand(MemoryStore):
    """A liveness lock whose connection is lost when the test says so; the next one holds."""

    def __init__(self) -> None:
        super().__init__()
        self.cut = False

    async def hold_liveness(self, worker_id: str) -> Any:
        self.cut = False
        return CutWhen(lambda: self.cut)


async def test_a_lock_lost_in_the_grace_of_a_shutdown_still_stops_the_attempts(
    gate: Gate,
) -> None:
    """The liveness checks run on through the grace period of a shutdown (they end only as the
    row is deleted): a lock lost then stops the running attempts at once, as the others may
    be taking their jobs, rather than let them run out a long grace."""
    store = CutOnDemand()
    [job_id] = await enqueue(store, 1)
    worker = Worker(store, settings(lease_duration=1.5, shutdown_grace=60.0), Tracing())
    await worker.start()
    await eventually(at_least(1, gate), "the job running")
    stopping = asyncio.create_task(worker.stop())
    store.cut = True
    await asyncio.wait_for(stopping, 10.0)  # not the 60 s grace
    record = await store.get_job(job_id)
    assert record is not None
    assert (record.status, record.attempts) == (JobStatus.PENDING, 0)


async def test_what_a_rescue_found_before_its_own_lock_was_lost_is_forgotten() -> None:
    """A peer found without its lock before the rescuer lost its own, and found so again once
    the rescuer holds its lock again, was freed again (an operator's next round of ending
    sessions), not free all along: it is looked at afresh, not rescued at once."""
    store = PeerWithoutItsLock()
    asked = store.asked
    liveness = Liveness(
        store, "w", 60.0, 1.0, list, lambda q: None, _nothing, _still, settle=0.0,
        dead_after=0.05,
    )  # fmt: skip
    await liveness.start()  # its first lock is lost at once (Flaky)
    await liveness.rescue()  # finds the peer without its lock: the first look
    await liveness.check()  # finds its own lock lost, and takes it again
    await asyncio.sleep(0.1)  # past `dead_after` since the first look
    await liveness.rescue()
    assert asked == []  # a first look again

    async def rescued() -> bool:
        await liveness.rescue()
        return asked == [["peer"]]

    await eventually(rescued, "the peer's jobs rescued once its lock stayed free")
    await liveness.stop()
