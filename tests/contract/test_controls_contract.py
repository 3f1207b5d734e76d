"""Queue controls (docs/limits.md) on both stores: pause and resume, the limits workers declare,
and the claim of a limited queue. Several worker processes on one limit: processes/test_limits.py.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest

from starlette_jobs import Jobs, JobStatus, Queue, QueueControls, QueueLimits, job
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.postgres._store import PostgresStore
from starlette_jobs.store._protocol import Store
from tests.records import new_jobs as new
from tests.records import outcome as ended

LEASE = 30.0
QUEUE = "controlled"


@pytest.fixture
def shared_dsn(postgres_dsn: str | None) -> str:
    """A database that several `Jobs` of the test share (a named memory store, while one of
    them holds it)."""
    return postgres_dsn or f"memory://controls-{uuid.uuid4().hex}"


# -- the store ---------------------------------------------------------------------------------


async def test_a_queue_never_controlled_is_neither_paused_nor_limited(store: Store) -> None:
    assert await store.queue_controls(["a", "b"]) == {
        "a": QueueControls("a"),
        "b": QueueControls("b"),
    }


async def test_pause_and_resume_are_kept_apart_from_the_declared_limits(store: Store) -> None:
    await store.set_paused(QUEUE, True)
    await store.declare_queues({QUEUE: QueueLimits(global_limit=3), "other": QueueLimits()})
    assert await store.queue_controls([QUEUE, "other"]) == {
        QUEUE: QueueControls(QUEUE, paused=True, limits=QueueLimits(global_limit=3)),
        "other": QueueControls("other"),
    }
    await store.set_paused(QUEUE, False)
    await store.set_paused(QUEUE, False)  # resuming a queue that is not paused changes nothing
    # The last worker to start wins: one that declares no limit lifts it.
    await store.declare_queues({QUEUE: QueueLimits()})
    assert await store.queue_controls([QUEUE]) == {QUEUE: QueueControls(QUEUE)}


async def test_a_paused_queue_gives_no_limited_claim_and_a_resumed_one_does(store: Store) -> None:
    await store.insert_jobs(new(3, queue=QUEUE))
    await store.set_paused(QUEUE, True)
    assert await store.claim_limited_batch(QUEUE, 10, "w", LEASE) == []
    await store.set_paused(QUEUE, False)
    assert len(await store.claim_limited_batch(QUEUE, 10, "w", LEASE)) == 3


async def test_a_limited_claim_leaves_at_most_the_global_limit_running(store: Store) -> None:
    await store.declare_queues({QUEUE: QueueLimits(global_limit=3)})
    await store.insert_jobs(new(6, queue=QUEUE))
    [other] = await store.insert_jobs(new(queue="elsewhere"))
    await store.claim_batch("elsewhere", 10, "w", LEASE)  # another queue's jobs do not count
    first = await store.claim_limited_batch(QUEUE, 2, "w1", LEASE)  # the worker's free slots
    second = await store.claim_limited_batch(QUEUE, 10, "w2", LEASE)  # the limit's room
    assert (len(first), len(second)) == (2, 1)
    assert await store.claim_limited_batch(QUEUE, 10, "w3", LEASE) == []
    await store.record_outcomes([ended(first[0], JobStatus.SUCCEEDED)])
    assert len(await store.claim_limited_batch(QUEUE, 10, "w3", LEASE)) == 1
    counts = await store.count_by_status(QUEUE)
    assert (counts[JobStatus.RUNNING], counts[JobStatus.PENDING]) == (3, 2)
    assert other not in [c.id for c in first + second]


async def test_an_attempt_that_ended_leaves_its_room_before_its_outcome_is_written(
    store: Store,
) -> None:
    await store.declare_queues({QUEUE: QueueLimits(global_limit=2)})
    await store.insert_jobs(new(5, queue=QUEUE))
    first = await store.claim_limited_batch(QUEUE, 10, "w1", LEASE)
    assert len(first) == 2
    # Another worker's token, or one that no longer holds a job, frees nothing.
    assert await store.claim_limited_batch(QUEUE, 10, "w2", LEASE, [uuid.uuid4()]) == []
    # w1's first attempt ended; its outcome is on its way: w1 may take its room now.
    again = await store.claim_limited_batch(QUEUE, 10, "w1", LEASE, [first[0].lease_token])
    assert len(again) == 1
    await store.record_outcomes([ended(first[0], JobStatus.SUCCEEDED)])
    assert await store.claim_limited_batch(QUEUE, 10, "w2", LEASE) == []  # 2 running again


async def test_a_key_limit_runs_at_most_that_many_jobs_per_value_of_the_argument(
    store: Store,
) -> None:
    await store.declare_queues({QUEUE: QueueLimits(key="customer_id", key_limit=2)})
    payloads = ['{"customer_id": "a"}'] * 3 + ['{"customer_id": 7}'] * 3 + ['{"other": 1}'] * 2
    for payload in payloads:  # one at a time: in this claim order
        await store.insert_jobs(new(queue=QUEUE, payload=payload))
    first = await store.claim_limited_batch(QUEUE, 3, "w1", LEASE)  # the worker's slots
    second = await store.claim_limited_batch(QUEUE, 10, "w2", LEASE)
    keys = [c.payload for c in first + second]
    # Two of customer "a" and two of customer 7 (a number: its JSON text is the key), and every
    # job without the argument; the third of each customer waits.
    assert sorted(keys) == sorted(payloads[0:2] + payloads[3:5] + payloads[6:8])
    assert await store.claim_limited_batch(QUEUE, 10, "w3", LEASE) == []
    await store.record_outcomes([ended(first[0], JobStatus.SUCCEEDED)])  # one of customer "a"
    [third] = await store.claim_limited_batch(QUEUE, 10, "w3", LEASE)
    assert third.payload == '{"customer_id": "a"}'


async def test_a_key_limit_counts_one_object_value_as_one_key_whatever_its_keys_order(
    store: Store,
) -> None:
    """The key's value is an object, built by two code paths in a different order: one
    customer, one key (PostgreSQL's jsonb knows no order of keys), on both stores."""
    await store.declare_queues({QUEUE: QueueLimits(key="customer", key_limit=1)})
    for payload in [
        '{"customer": {"id": 1, "region": "eu"}}',
        '{"customer": {"region": "eu", "id": 1}}',
    ]:
        await store.insert_jobs(new(queue=QUEUE, payload=payload))
    assert len(await store.claim_limited_batch(QUEUE, 10, "w", LEASE)) == 1


@pytest.mark.parametrize(
    "same",
    [
        ("1e20", "100000000000000000000"),
        ("-0.0", "0.0"),
        ("2.5e-3", "0.0025"),
        ('{"n": 1E2, "m": [0.0]}', '{"m": [-0.0], "n": 100}'),
    ],
)
async def test_a_key_limit_counts_one_number_however_it_is_written_as_one_key(
    store: Store, same: tuple[str, str]
) -> None:
    """PostgreSQL reads a number in the payload as `numeric`, which writes 1e20 out in full
    and knows no negative zero: one key. The memory store grouped them by their JSON text."""
    await store.declare_queues({QUEUE: QueueLimits(key="customer", key_limit=1)})
    for value in same:
        await store.insert_jobs(new(queue=QUEUE, payload=f'{{"customer": {value}}}'))
    assert len(await store.claim_limited_batch(QUEUE, 10, "w", LEASE)) == 1


async def test_a_key_limit_and_a_global_limit_hold_together(store: Store) -> None:
    limits = QueueLimits(global_limit=3, key="customer_id", key_limit=1)
    await store.declare_queues({QUEUE: limits})
    for customer in "aabbccdd":
        await store.insert_jobs(new(queue=QUEUE, payload=f'{{"customer_id": "{customer}"}}'))
    claims = await store.claim_limited_batch(QUEUE, 10, "w", LEASE)
    assert sorted(c.payload for c in claims) == [f'{{"customer_id": "{c}"}}' for c in "abc"]
    assert (await store.queue_controls([QUEUE]))[QUEUE].limits == limits


async def test_a_rate_limit_counts_starts_not_running_jobs(store: Store) -> None:
    limits = QueueLimits(rate_limit=3, rate_period=3600)
    await store.declare_queues({QUEUE: limits})
    await store.insert_jobs(new(10, queue=QUEUE))
    first = await store.claim_limited_batch(QUEUE, 2, "w1", LEASE)
    second = await store.claim_limited_batch(QUEUE, 10, "w2", LEASE)
    assert (len(first), len(second)) == (2, 1)
    await store.record_outcomes([ended(c, JobStatus.SUCCEEDED) for c in first + second])
    # Nothing runs, and still no start is left in this hour.
    assert await store.claim_limited_batch(QUEUE, 10, "w3", LEASE) == []
    assert (await store.queue_controls([QUEUE]))[QUEUE].limits == limits


async def test_a_rate_limit_lifted_then_declared_again_counts_no_start_from_before(
    store: Store,
) -> None:
    hourly = QueueLimits(rate_limit=1, rate_period=3600)
    await store.declare_queues({QUEUE: hourly})
    await store.insert_jobs(new(3, queue=QUEUE))
    assert len(await store.claim_limited_batch(QUEUE, 10, "w1", LEASE)) == 1
    await store.declare_queues({QUEUE: QueueLimits(global_limit=10)})  # the rate limit lifted
    assert len(await store.claim_limited_batch(QUEUE, 1, "w1", LEASE)) == 1
    await store.declare_queues({QUEUE: hourly})  # and declared again
    assert len(await store.claim_limited_batch(QUEUE, 10, "w1", LEASE)) == 1


async def stamp_starts_an_hour_ahead(store: Store, queue: str) -> None:
    """The queue's recorded starts, as if they were recorded before the database's clock was
    set back an hour (a wrong clock corrected)."""
    if isinstance(store, PostgresStore):
        async with store.pool.acquire() as connection:
            await connection.execute(
                "UPDATE starlette_jobs_queues SET recent_starts = array(SELECT at "
                "+ interval '1 hour' FROM unnest(recent_starts) AS s(at)) WHERE name = $1",
                queue,
            )
    else:
        assert isinstance(store, MemoryStore)
        starts = store.data.recent_starts[queue]
        store.data.recent_starts[queue] = [at + timedelta(hours=1) for at in starts]


async def test_a_clock_set_back_neither_stalls_a_rate_limit_nor_lifts_it(store: Store) -> None:
    await store.declare_queues({QUEUE: QueueLimits(rate_limit=2, rate_period=60)})
    await store.insert_jobs(new(10, queue=QUEUE))
    assert len(await store.claim_limited_batch(QUEUE, 10, "w", LEASE)) == 2
    await stamp_starts_an_hour_ahead(store, QUEUE)
    # Starts "in the future" are not within the minute before now: not an hour of no starts.
    assert len(await store.claim_limited_batch(QUEUE, 10, "w", LEASE)) == 2
    # And the starts made since count: the limit holds.
    assert await store.claim_limited_batch(QUEUE, 10, "w", LEASE) == []


async def test_a_rate_limit_allows_its_starts_again_once_the_period_has_passed(
    store: Store,
) -> None:
    await store.declare_queues({QUEUE: QueueLimits(rate_limit=2, rate_period=0.2)})
    await store.insert_jobs(new(10, queue=QUEUE))
    assert len(await store.claim_limited_batch(QUEUE, 10, "w", LEASE)) == 2
    assert await store.claim_limited_batch(QUEUE, 10, "w", LEASE) == []
    await asyncio.sleep(0.25)  # the store's clock: the period is over
    assert len(await store.claim_limited_batch(QUEUE, 1, "w", LEASE)) == 1
    await asyncio.sleep(0.1)
    # A start 0.1 s ago is within the period: one more, not two.
    assert len(await store.claim_limited_batch(QUEUE, 10, "w", LEASE)) == 1


async def test_a_limited_claim_of_a_queue_whose_limit_was_lifted_takes_what_it_asks(
    store: Store,
) -> None:
    await store.insert_jobs(new(4, queue=QUEUE))
    # A worker still holding an old copy of the controls claims as for a limited queue.
    assert len(await store.claim_limited_batch(QUEUE, 4, "w", LEASE)) == 4


async def test_workers_are_told_of_a_change_of_controls_and_woken_for_freed_room(
    store: Store,
) -> None:
    changed: asyncio.Queue[str] = asyncio.Queue()
    woken: asyncio.Queue[str] = asyncio.Queue()
    listener = await store.listen([QUEUE], woken.put_nowait, on_controls=changed.put_nowait)
    try:
        await store.set_paused(QUEUE, True)
        assert await asyncio.wait_for(changed.get(), 10) == QUEUE
        await store.declare_queues({"other": QueueLimits(global_limit=1)})
        assert await asyncio.wait_for(changed.get(), 10) == "other"  # any queue's change
        await store.wake_queues([QUEUE, "not-listened"])
        assert await asyncio.wait_for(woken.get(), 10) == QUEUE
    finally:
        await listener.close()


# -- Jobs and workers --------------------------------------------------------------------------


class Peak:
    """How many `limited_sleep` jobs ran at once at most, in this process."""

    def __init__(self) -> None:
        self.now = self.most = 0


peaks: list[Peak] = []


@pytest.fixture
def peak() -> Iterator[Peak]:
    peaks.append(Peak())
    yield peaks[-1]
    peaks.pop()


@job(queue=QUEUE)
async def limited_sleep(n: int, seconds: float) -> int:
    peak = peaks[-1]
    peak.now += 1
    peak.most = max(peak.most, peak.now)
    try:
        await asyncio.sleep(seconds)
    finally:
        peak.now -= 1
    return n


async def test_a_paused_queue_is_not_claimed_from_enqueue_goes_on_and_resume_runs_it(
    shared_dsn: str, peak: Peak
) -> None:
    async with Jobs(shared_dsn, queues={QUEUE: 5}, poll_interval=0.05) as jobs:
        await jobs.pause(QUEUE)
        assert (await jobs.queue_controls(QUEUE)).paused
        # A claim already on its way when the pause lands may still take jobs: the pause is
        # promised within a poll interval. Two of them, and the job comes after.
        await asyncio.sleep(0.1)
        job_id = await jobs.enqueue(limited_sleep, n=1, seconds=0)
        # Nothing announces a claim that does not happen: the worker polls the queue a dozen
        # times meanwhile, and the job is still pending.
        await asyncio.sleep(0.6)
        record = await jobs.get(job_id)
        assert record is not None
        assert record.status is JobStatus.PENDING
        await jobs.resume(QUEUE)
        assert await jobs.result(limited_sleep, job_id, timeout=10) == 1
        assert not (await jobs.queue_controls(QUEUE)).paused


async def test_a_pause_outlasts_the_jobs_that_set_it_and_any_process_resumes(
    shared_dsn: str, peak: Peak
) -> None:
    async with Jobs(shared_dsn, queues={}) as holder:  # keeps a memory store alive meanwhile
        async with Jobs(shared_dsn, queues={}) as pausing:
            await pausing.pause(QUEUE)
        async with Jobs(shared_dsn, queues={QUEUE: 5}, poll_interval=0.05) as worker:
            assert (await worker.queue_controls(QUEUE)).paused
            job_id = await worker.enqueue(limited_sleep, n=2, seconds=0)
            await asyncio.sleep(0.3)  # six polls, none of which claims
            record = await worker.get(job_id)
            assert record is not None
            assert record.status is JobStatus.PENDING
            await holder.resume(QUEUE)  # a process that enqueues only
            assert await worker.result(limited_sleep, job_id, timeout=10) == 2


async def test_a_global_limit_holds_across_two_workers_on_one_store(
    shared_dsn: str, peak: Peak
) -> None:
    limited = Queue(concurrency=5, global_limit=3)
    async with (
        Jobs(shared_dsn, queues={QUEUE: limited}, poll_interval=0.05) as first,
        Jobs(shared_dsn, queues={QUEUE: limited}, poll_interval=0.05) as second,
    ):
        ids = [await first.enqueue(limited_sleep, n=n, seconds=0.05) for n in range(15)]
        results = [await second.result(limited_sleep, i, timeout=20) for i in ids]
        assert results == list(range(15))
        assert (await first.queue_controls(QUEUE)).limits == QueueLimits(global_limit=3)
    # Ten slots between the two, and fifteen jobs long enough to fill them: the limit, exactly.
    assert peak.most == 3


per_customer_running: dict[str, int] = {}
per_customer_most: dict[str, int] = {}


@job(queue=QUEUE)
async def sync_customer(customer: str, seconds: float) -> str:
    per_customer_running[customer] = per_customer_running.get(customer, 0) + 1
    most = max(per_customer_most.get(customer, 0), per_customer_running[customer])
    per_customer_most[customer] = most
    try:
        await asyncio.sleep(seconds)
    finally:
        per_customer_running[customer] -= 1
    return customer


async def test_a_key_limit_holds_across_two_workers_for_jobs_any_process_enqueued(
    shared_dsn: str,
) -> None:
    per_customer_most.clear()
    one_each = Queue(concurrency=5, key="customer", key_limit=1)
    async with (
        Jobs(shared_dsn, queues={}) as producer,  # declares nothing: the workers' limit holds
        Jobs(shared_dsn, queues={QUEUE: one_each}, poll_interval=0.05) as first,
        Jobs(shared_dsn, queues={QUEUE: one_each}, poll_interval=0.05) as second,
    ):
        ids = [
            await producer.enqueue(sync_customer, customer=customer, seconds=0.05)
            for customer in "abc" * 4
        ]
        results = [await first.result(sync_customer, i, timeout=20) for i in ids]
        assert results == list("abc" * 4)
        assert second.worker_id is not None
    assert per_customer_most == {"a": 1, "b": 1, "c": 1}


start_times: list[float] = []


@job(queue=QUEUE)
async def rate_limited(n: int) -> int:
    start_times.append(time.monotonic())
    return n


async def test_a_rate_limit_holds_across_two_workers(shared_dsn: str) -> None:
    start_times.clear()
    three_a_period = Queue(concurrency=10, rate_limit=3, rate_period=0.3)
    async with (
        Jobs(shared_dsn, queues={QUEUE: three_a_period}, poll_interval=0.05) as first,
        Jobs(shared_dsn, queues={QUEUE: three_a_period}, poll_interval=0.05) as second,
    ):
        ids = await first.enqueue_many(rate_limited, [{"n": n} for n in range(9)])
        for job_id in ids:
            await second.wait(job_id, timeout=20)
    assert len(start_times) == 9
    start_times.sort()
    # Three starts per 0.3 s: nine take two periods at least.
    assert start_times[-1] - start_times[0] >= 0.6
    # The store counts a start when the claim commits; the job starts a little later, so its
    # own clock sees the same window a few milliseconds narrower.
    for i, began in enumerate(start_times):
        assert sum(1 for t in start_times[i:] if t < began + 0.25) <= 3
