"""Cluster upkeep and wake-ups (`_upkeep`) on the in-memory store: rescuing expired leases,
starting the retention (its rounds: test_retention.py), and a LISTEN that reopens when it goes
silent. On PostgreSQL: integration/test_release_and_retention.py and
integration/test_silent_network.py."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from uuid import UUID

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from starlette_jobs import DatabaseUnavailableError, JobStatus
from starlette_jobs._errors import DatabaseTooSlowError
from starlette_jobs._metrics import Metrics
from starlette_jobs.memory._rows import QueueListener
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.worker._upkeep import Upkeep, Wakeups
from tests.conftest import eventually
from tests.records import new_jobs, outcome
from tests.test_metrics import points


async def test_jobs_whose_lease_expired_are_rescued_and_their_queue_woken(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    await store.insert_jobs(new_jobs(1, queue="mail", max_attempts=2))
    await store.insert_jobs(new_jobs(1, queue="sms", max_attempts=1))
    [retried] = await store.claim_batch("mail", 1, "w", 0.01)
    [exhausted] = await store.claim_batch("sms", 1, "w", 0.01)
    await asyncio.sleep(0.03)  # the store's clock: both leases run out
    woken: list[str] = []
    with caplog.at_level(logging.WARNING, logger="starlette_jobs.worker"):
        await Upkeep(store, 1, None, woken.append).rescue_expired()
    assert sorted(woken) == ["mail", "sms"]
    assert await store.job_status(retried.id) is JobStatus.PENDING
    assert await store.job_status(exhausted.id) is JobStatus.FAILED
    assert f"job {retried.id} on queue 'mail': lease expired, now pending" in caplog.messages
    assert f"job {exhausted.id} on queue 'sms': lease expired, now failed" in caplog.messages


async def test_upkeep_starts_and_stops_the_workers_retention() -> None:
    store = MemoryStore()
    await store.insert_jobs(new_jobs(1))
    [claim] = await store.claim_batch("default", 1, "w", 30)
    await store.record_outcomes([outcome(claim, JobStatus.SUCCEEDED)])
    upkeep = Upkeep(store, 0.01, 0.01, lambda _: None)
    upkeep.start()
    try:

        async def pruned() -> bool:
            return not await store.list_jobs(None, None, 10)

        await eventually(pruned, "the finished job to be deleted")
    finally:
        await upkeep.stop()


async def test_once_started_upkeep_keeps_going_after_a_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rounds = 0
    two_rounds = asyncio.Event()

    class Failing(MemoryStore):
        async def rescue_expired(self, limit: int) -> list[tuple[int, str, JobStatus]]:
            nonlocal rounds
            rounds += 1
            if rounds == 2:
                two_rounds.set()
            raise DatabaseUnavailableError("reset by peer")

    upkeep = Upkeep(Failing(), 0.01, None, lambda _: None)
    with caplog.at_level(logging.WARNING, logger="starlette_jobs.worker"):
        upkeep.start()
        try:
            async with asyncio.timeout(5):
                await two_rounds.wait()
        finally:
            await upkeep.stop()
    assert "upkeep failed, retrying: reset by peer" in caplog.messages


class SlowRescues(MemoryStore):
    """A rescue of more than `fits` jobs runs past the statement timeout: PostgreSQL rewrites
    each job's `errors` (up to 100 entries of 8,000 characters), and 1,000 jobs with a long
    history took more than the 8 s a worker's statement is given."""

    def __init__(self, fits: int) -> None:
        super().__init__()
        self.fits = fits
        self.limits: list[int] = []

    async def rescue_expired(self, limit: int) -> list[tuple[int, str, JobStatus]]:
        self.limits.append(limit)
        if limit > self.fits:
            raise DatabaseTooSlowError("canceling statement due to statement timeout")
        return await super().rescue_expired(limit)


async def test_a_rescue_too_slow_for_its_batch_takes_fewer_jobs_until_it_fits() -> None:
    store = SlowRescues(fits=100)
    await store.insert_jobs(new_jobs(300, queue="mail", max_attempts=2))
    await store.claim_batch("mail", 300, "w", 0.01)
    await asyncio.sleep(0.03)  # every lease runs out
    upkeep = Upkeep(store, 1, None, lambda _: None)
    for _ in range(20):  # upkeep's rounds
        with contextlib.suppress(DatabaseTooSlowError):
            await upkeep.rescue_expired()
    # On the old code every round asked for 1,000 again and timed out: none was ever rescued.
    counts = await store.count_by_status("mail")
    assert (counts[JobStatus.PENDING], counts[JobStatus.RUNNING]) == (300, 0)


# -- wake-ups --------------------------------------------------------------------------------


async def test_a_notification_wakes_its_queue_and_stop_closes_the_listener() -> None:
    store = MemoryStore()
    woken: list[str] = []
    wakeups = Wakeups(store, ["mail", "sms"], woken.append)
    await wakeups.start()
    await store.insert_jobs(new_jobs(1, queue="mail"))
    await store.insert_jobs(new_jobs(1, queue="elsewhere"))
    assert woken == ["mail"]
    await wakeups.stop()
    await store.insert_jobs(new_jobs(1, queue="mail"))
    assert woken == ["mail"]


async def test_a_cancel_request_is_passed_on_with_the_attempts_lease_token() -> None:
    store = MemoryStore()
    asked: list[UUID] = []
    wakeups = Wakeups(store, ["mail"], lambda _: None, on_cancel=asked.append)
    await wakeups.start()
    [job_id] = await store.insert_jobs(new_jobs(1, queue="sms"))  # any worker's job
    [claim] = await store.claim_batch("sms", 1, "elsewhere", 30)
    assert await store.cancel_job(job_id) is JobStatus.RUNNING
    assert asked == [claim.lease_token]
    await wakeups.stop()


class NoListen(MemoryStore):
    """LISTEN cannot open (too many connections); counts how often the connections expire."""

    expired = 0

    async def listen(
        self,
        queues: Sequence[str],
        on_notify: Callable[[str], None],
        on_cancel: Callable[[UUID], None] | None = None,
        on_controls: Callable[[str], None] | None = None,
    ) -> QueueListener:
        raise DatabaseUnavailableError("too many connections")

    async def expire_connections(self) -> None:
        self.expired += 1


async def test_a_listen_that_fails_at_start_leaves_polling_and_does_not_raise(
    caplog: pytest.LogCaptureFixture,
) -> None:
    wakeups = Wakeups(NoListen(), ["mail"], lambda _: None)
    with caplog.at_level(logging.WARNING, logger="starlette_jobs.worker"):
        await wakeups.start()
    await wakeups.stop()
    assert "LISTEN connection failed, polling until it is back: too many connections" in (
        caplog.messages
    )


async def test_a_listener_opened_again_wakes_every_queue_for_what_it_missed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    woken: list[str] = []
    wakeups = Wakeups(store, ["mail", "sms"], woken.append)
    await wakeups.start()
    assert await wakeups.answers(1.0)
    with caplog.at_level(logging.WARNING, logger="starlette_jobs.worker"):
        await wakeups.reopen()  # as after a check it did not answer
    assert woken == ["mail", "sms"]
    assert "the LISTEN connection stopped answering" in caplog.text
    assert len(store._listeners) == 1  # the old one terminated
    await wakeups.stop()
    assert store._listeners == set()
    assert not await wakeups.answers(1.0)


async def test_a_listener_stopped_while_a_check_reopens_it_stays_closed() -> None:
    store = MemoryStore()
    woken: list[str] = []
    wakeups = Wakeups(store, ["mail"], woken.append)
    await wakeups.start()
    await wakeups.stop()
    await wakeups.reopen()  # a liveness check that ended after the worker stopped it
    assert store._listeners == set()
    assert woken == []


async def test_rescued_jobs_are_counted_by_queue_and_what_became_of_them() -> None:
    reader = InMemoryMetricReader()
    metrics = Metrics(MeterProvider(metric_readers=[reader]))
    store = MemoryStore()
    await store.insert_jobs(new_jobs(2, queue="mail", max_attempts=2))
    await store.insert_jobs(new_jobs(1, queue="sms", max_attempts=1))
    await store.claim_batch("mail", 2, "w", 0.01)
    await store.claim_batch("sms", 1, "w", 0.01)
    await asyncio.sleep(0.03)  # the store's clock: the leases run out
    await Upkeep(store, 1, None, lambda queue: None, metrics).rescue_expired()
    counted = {
        (a["messaging.destination.name"], a["starlette_jobs.job.status"]): p.value
        for a, p in points(reader)["starlette_jobs.jobs.rescued"]
        if a["starlette_jobs.reason"] == "lease_expired"
    }
    assert counted == {("mail", "pending"): 2, ("sms", "failed"): 1}
