"""The Store contract: the semantics both stores share, run against PostgreSQL and memory alike.

This is the one place those semantics are tested store by store; a feature that lands in one
store lands in the other, held by a test here. What only PostgreSQL can do (several processes,
LISTEN/NOTIFY across them, migrations, network faults, joining a caller's transaction) is
tested elsewhere, on PostgreSQL; the last tests here show the memory store refusing it clearly.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import pytest

from starlette_jobs import (
    Jobs,
    JobStatus,
    MemoryStoreUnsupportedError,
    Retry,
    UniqueKeyTakenError,
    current_job,
    job,
)
from starlette_jobs._attempt_records import Outcome, Renewal, Unfinished
from starlette_jobs._errors import last_line
from starlette_jobs._records import EventKind, JobEvent
from starlette_jobs._storable import MAX_KEPT_ERRORS
from starlette_jobs._worker_records import NewWorker
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.store._protocol import Store
from tests.conftest import eventually
from tests.records import new_jobs as new
from tests.records import outcome as ended

LEASE = 30.0


async def expire(seconds: float = 0.05) -> None:
    """Let a lease of 0.01 s (or a delay) run out in the store's own clock."""
    await asyncio.sleep(seconds)


# -- insert and claim --------------------------------------------------------------------------


async def test_ids_come_back_in_order_and_the_rows_read_back(store: Store) -> None:
    ids = await store.insert_jobs(new(3, name="tests.contract", payload='{"a": [1, 2], "b": "x"}'))
    assert ids == sorted(set(ids))
    assert len(ids) == 3
    record = await store.get_job(ids[1])
    assert record is not None
    assert (record.name, record.queue, record.status, record.arguments) == (
        "tests.contract",
        "default",
        JobStatus.PENDING,
        {"a": [1, 2], "b": "x"},
    )
    assert (record.attempts, record.max_attempts, record.errors, record.result) == (0, 3, [], None)
    assert await store.get_job(ids[-1] + 1000) is None


async def test_a_claim_takes_due_jobs_of_its_queue_by_priority_then_age_then_id(
    store: Store,
) -> None:
    [low] = await store.insert_jobs(new(priority=0))
    [high] = await store.insert_jobs(new(priority=5))
    [later] = await store.insert_jobs(new(delay=3600))
    [elsewhere] = await store.insert_jobs(new(queue="other"))
    [low_too] = await store.insert_jobs(new(priority=0))
    first = await store.claim_batch("default", 2, "w", LEASE)
    # Which jobs a claim takes follows the order; the order it returns them in is not promised.
    assert sorted(c.id for c in first) == sorted([high, low])
    rest = await store.claim_batch("default", 10, "w", LEASE)
    assert [c.id for c in rest] == [low_too]  # not the delayed job, nor another queue's
    assert later not in [c.id for c in first + rest]
    assert elsewhere not in [c.id for c in rest]
    assert all(c.attempts == 1 and c.queue == "default" for c in first + rest)
    assert len({c.lease_token for c in first + rest}) == 3
    record = await store.get_job(high)
    assert record is not None
    assert (record.status, record.worker_id, record.attempts) == (JobStatus.RUNNING, "w", 1)


# -- outcomes and the fence --------------------------------------------------------------------


async def test_outcomes_are_written_once_and_only_under_the_current_lease(store: Store) -> None:
    [job_id] = await store.insert_jobs(new())
    [stale] = await store.claim_batch("default", 1, "stalled", 0.01)
    await expire()
    assert [(i, s) for i, _, s in await store.rescue_expired(10)] == [(job_id, JobStatus.PENDING)]
    [fresh] = await store.claim_batch("default", 1, "healthy", LEASE)
    assert (fresh.id, fresh.attempts) == (job_id, 2)

    assert await store.record_outcomes([ended(stale, JobStatus.SUCCEEDED)]) == set()
    assert await store.extend_leases([(stale.id, stale.lease_token)], LEASE) == {}
    assert await store.release_jobs([(stale.id, stale.lease_token)]) == set()
    assert await store.extend_leases([(fresh.id, fresh.lease_token)], LEASE) == {
        fresh.lease_token: Renewal(renewed=True, cancel_requested=False)
    }
    done = ended(fresh, JobStatus.SUCCEEDED, result='{"ok": true}')
    assert await store.record_outcomes([done]) == {job_id}
    assert await store.record_outcomes([done]) == set()  # once
    record = await store.get_job(job_id)
    assert record is not None
    assert (record.status, record.result, record.attempts) == (JobStatus.SUCCEEDED, {"ok": True}, 2)
    assert record.finished_at is not None
    assert [e["attempt"] for e in record.errors] == [1]
    assert "lease expired: worker stalled" in record.errors[0]["error"]


async def test_a_failed_attempt_keeps_its_error_and_waits_for_its_retry(store: Store) -> None:
    [job_id] = await store.insert_jobs(new())
    [claim] = await store.claim_batch("default", 1, "w", LEASE)
    retry = ended(claim, JobStatus.PENDING, delay=3600, error="boom")
    assert await store.record_outcomes([retry]) == {job_id}
    assert await store.claim_batch("default", 10, "w", LEASE) == []  # not due for an hour
    record = await store.get_job(job_id)
    assert record is not None
    assert (record.status, record.attempts, record.last_error) == (JobStatus.PENDING, 1, "boom")
    assert [(e["attempt"], e["error"], e["worker_id"]) for e in record.errors] == [(1, "boom", "w")]
    assert record.finished_at is None
    # A retry is counted apart from jobs scheduled by their enqueue, with a horizon of its own.
    assert await store.count_unfinished(["default"], 0, 0) == Unfinished(0, 0, 1)
    assert await store.count_unfinished(["default"], 0, 7200) == Unfinished(1, 0, 0)
    assert await store.count_unfinished(["default"], 7200, 0) == Unfinished(0, 0, 1)
    assert await store.count_unfinished(["default"], 0, None) == Unfinished(1, 0, 0)
    [later] = await store.insert_jobs(new(delay=3600))
    assert await store.count_unfinished(["default"], 0, None) == Unfinished(1, 1, 0)
    assert await store.count_unfinished(["default"], 7200, 0) == Unfinished(1, 0, 1)
    assert await store.count_unfinished(["default"], None, None) == Unfinished(2, 0, 0)
    assert await store.cancel_job(later) is JobStatus.CANCELLED


async def test_a_retry_after_a_short_delay_is_claimed_again(store: Store) -> None:
    [job_id] = await store.insert_jobs(new())
    [claim] = await store.claim_batch("default", 1, "w", LEASE)
    await store.record_outcomes([ended(claim, JobStatus.PENDING, delay=0.01, error="boom")])
    await expire()
    [again] = await store.claim_batch("default", 1, "w", LEASE)
    assert (again.id, again.attempts) == (job_id, 2)
    await store.record_outcomes([ended(again, JobStatus.FAILED, error="boom again")])
    record = await store.get_job(job_id)
    assert record is not None
    assert (record.status, record.last_error) == (JobStatus.FAILED, "boom again")
    assert [e["attempt"] for e in record.errors] == [1, 2]


async def test_a_job_that_succeeds_after_failing_shows_no_error_but_keeps_them_all(
    store: Store,
) -> None:
    [job_id] = await store.insert_jobs(new())
    [claim] = await store.claim_batch("default", 1, "w", LEASE)
    await store.record_outcomes([ended(claim, JobStatus.PENDING, delay=0.01, error="boom")])
    await expire()
    [again] = await store.claim_batch("default", 1, "w", LEASE)
    await store.record_outcomes([ended(again, JobStatus.SUCCEEDED)])
    record = await store.get_job(job_id)
    assert record is not None
    assert (record.status, record.last_error) == (JobStatus.SUCCEEDED, None)
    assert [(e["attempt"], e["error"]) for e in record.errors] == [(1, "boom")]


async def test_a_job_retried_without_end_keeps_the_errors_of_its_latest_attempts(
    store: Store,
) -> None:
    # Every outcome rewrites the row: an `errors` list that grew by an entry an attempt for
    # ever would make each write slower, until PostgreSQL refused the row.
    [job_id] = await store.insert_jobs(new(max_attempts=MAX_KEPT_ERRORS + 10))
    for attempt in range(1, MAX_KEPT_ERRORS + 6):
        [claim] = await store.claim_batch("default", 1, "w", LEASE)
        assert claim.attempts == attempt
        failed = ended(claim, JobStatus.PENDING, delay=0, error=f"boom {attempt}")
        assert await store.record_outcomes([failed]) == {job_id}
    # Then its worker dies: the rescue's error is kept the same way.
    [claim] = await store.claim_batch("default", 1, "w", 0.01)
    await expire()
    assert [rescued for rescued, _, _ in await store.rescue_expired(10)] == [job_id]
    record = await store.get_job(job_id)
    assert record is not None
    kept = [entry["attempt"] for entry in record.errors]
    assert kept == list(range(MAX_KEPT_ERRORS + 7 - MAX_KEPT_ERRORS, MAX_KEPT_ERRORS + 7))
    assert record.errors[-2]["error"] == f"boom {MAX_KEPT_ERRORS + 5}"
    assert "lease expired" in record.errors[-1]["error"]


# -- leases and rescue -------------------------------------------------------------------------


async def test_rescue_leaves_the_expired_jobs_of_a_worker_the_registry_still_sees(
    store: Store,
) -> None:
    """An operator's LOCK TABLE past the lease held up the renewals and the rescue alike; when
    it ended, the rescue took rows first and failed the jobs of live workers as crashed. A
    worker seen within its last three heartbeats renews or gives back its jobs itself."""
    [seen, unseen, unknown] = await store.insert_jobs(new(3, max_attempts=1))
    for worker_id, heartbeat in (("seen", 10.0), ("unseen", 0.01)):
        await store.register_worker(
            NewWorker(worker_id, "host", 1, ("default",), (), "1", heartbeat_seconds=heartbeat)
        )
        await store.claim_batch("default", 1, worker_id, 0.01)
    await store.claim_batch("default", 1, "unregistered", 0.01)
    await expire()
    rescued = sorted(job_id for job_id, _, _ in await store.rescue_expired(10))
    assert rescued == sorted([unseen, unknown])
    await store.unregister_worker("seen")  # it stopped, or was found dead
    assert [job_id for job_id, _, _ in await store.rescue_expired(10)] == [seen]


async def test_rescue_takes_the_longest_expired_first_and_fails_those_out_of_attempts(
    store: Store,
) -> None:
    [once] = await store.insert_jobs(new(max_attempts=1))
    [twice] = await store.insert_jobs(new(max_attempts=2))
    [kept] = await store.insert_jobs(new(max_attempts=2))
    await store.claim_batch("default", 1, "dead", 0.01)  # `once`, expires first
    await store.claim_batch("default", 1, "dead", 0.02)  # `twice`
    [alive] = await store.claim_batch("default", 1, "alive", LEASE)
    await expire()
    assert await store.rescue_expired(1) == [(once, "default", JobStatus.FAILED)]
    assert await store.rescue_expired(10) == [(twice, "default", JobStatus.PENDING)]
    assert await store.rescue_expired(10) == []
    assert alive.id == kept
    failed = await store.get_job(once)
    assert failed is not None
    assert (failed.status, failed.finished_at is not None) == (JobStatus.FAILED, True)


async def test_a_job_given_back_to_pending_wakes_its_queue(store: Store) -> None:
    """Released at a worker's shutdown, or rescued by any worker (even one that does not work
    its queue): the queue's workers are told, not left to find it at their next poll."""
    woken: list[str] = []

    async def both_woken() -> bool:
        return sorted(woken) == ["default", "other"]

    async def told_both() -> None:
        await eventually(both_woken, "both queues woken", timeout=5)
        woken.clear()

    listener = await store.listen(["default", "other"], woken.append)
    try:
        [released] = await store.insert_jobs(new(queue="other"))
        [rescued] = await store.insert_jobs(new())
        await told_both()  # the enqueues'
        [held] = await store.claim_batch("other", 1, "stopping", LEASE)
        await store.claim_batch("default", 1, "dead", 0.01)
        assert await store.release_jobs([(released, held.lease_token)]) == {released}
        await expire()
        assert await store.rescue_expired(10) == [(rescued, "default", JobStatus.PENDING)]
        await told_both()
    finally:
        await listener.close()


async def test_a_renewed_lease_is_not_rescued(store: Store) -> None:
    await store.insert_jobs(new())
    [claim] = await store.claim_batch("default", 1, "w", 0.3)
    await store.extend_leases([(claim.id, claim.lease_token)], LEASE)
    await expire(0.4)
    assert await store.rescue_expired(10) == []


# -- releases ----------------------------------------------------------------------------------


async def test_releases_give_the_attempt_back(store: Store) -> None:
    ids = await store.insert_jobs(new(4))
    claims = await store.claim_batch("default", 4, "w", LEASE)
    assert await store.release_jobs([(claims[0].id, claims[0].lease_token)]) == {ids[0]}
    assert await store.release_job(ids[1]) is True
    assert await store.release_job(ids[1]) is False  # no longer running
    assert await store.release_worker_jobs("w") == ids[2:]
    for job_id in ids:
        record = await store.get_job(job_id)
        assert record is not None
        assert (record.status, record.attempts, record.errors) == (JobStatus.PENDING, 0, [])
    again = await store.claim_batch("default", 4, "w", LEASE)
    assert sorted(c.id for c in again) == ids
    assert {c.attempts for c in again} == {1}


async def test_a_lost_claims_jobs_are_given_back_and_no_others(store: Store) -> None:
    known = await store.insert_jobs(new(2))
    await store.insert_jobs(new(queue="other"))
    mine = await store.claim_batch("default", 1, "me", LEASE)
    lost = await store.claim_batch("default", 1, "me", LEASE)  # its answer never came back
    await store.claim_batch("other", 1, "me", LEASE)  # another queue: not this loop's
    released = await store.release_unknown_claims("default", "me", [mine[0].lease_token])
    assert released == [lost[0].id] == [known[1]]
    assert await store.job_status(mine[0].id) is JobStatus.RUNNING
    assert await store.count_by_status("other") == {
        **dict.fromkeys(JobStatus, 0),
        JobStatus.RUNNING: 1,
    }
    record = await store.get_job(known[1])
    assert record is not None
    assert (record.status, record.attempts) == (JobStatus.PENDING, 0)
    assert await store.release_unknown_claims("default", "me", [uuid4(), mine[0].lease_token]) == []


# -- unique keys, cancel, retry ----------------------------------------------------------------


async def test_a_unique_key_is_held_by_one_live_job(store: Store) -> None:
    [first] = await store.insert_jobs(new(unique_key="k"))
    assert await store.insert_jobs(new(unique_key="k")) == [first]
    [claim] = await store.claim_batch("default", 1, "w", LEASE)
    assert await store.insert_jobs(new(unique_key="k")) == [first]  # running holds it too
    await store.record_outcomes([ended(claim, JobStatus.FAILED, error="boom")])
    [second] = await store.insert_jobs(new(unique_key="k"))  # finished jobs hold no key
    assert second != first
    with pytest.raises(UniqueKeyTakenError):
        await store.retry_job(first)
    assert await store.cancel_job(second) is JobStatus.CANCELLED
    assert await store.retry_job(first) is True
    record = await store.get_job(first)
    assert record is not None
    assert (record.status, record.attempts, record.finished_at) == (JobStatus.PENDING, 0, None)
    assert record.errors != []  # the history stays


async def test_a_pending_job_cancels_a_running_one_is_asked_to_stop_finished_ones_retry(
    store: Store,
) -> None:
    first, second = await store.insert_jobs(new(2))
    [claim] = await store.claim_batch("default", 1, "w", LEASE)  # the first is taken
    assert await store.cancel_job(second) is JobStatus.CANCELLED
    assert await store.cancel_job(second) is None  # already cancelled
    assert await store.retry_job(first) is False  # running
    assert await store.job_status(second) is JobStatus.CANCELLED
    assert await store.job_status(second + 1000) is None
    assert await store.cancel_job(second + 1000) is None

    assert await store.cancel_job(first) is JobStatus.RUNNING  # asked to stop
    assert await store.cancel_job(first) is None  # asked already
    assert await store.extend_leases([(first, claim.lease_token)], LEASE) == {
        claim.lease_token: Renewal(renewed=True, cancel_requested=True)
    }
    record = await store.get_job(first)
    assert record is not None
    assert (record.status, record.cancel_requested_at is not None) == (JobStatus.RUNNING, True)


# -- cancelling, progress, events, waiting, peeking ----------------------------------------------


async def test_a_job_asked_to_stop_ends_cancelled_however_its_attempt_ends(store: Store) -> None:
    told: list[UUID] = []
    all_told = asyncio.Event()

    def on_cancel(token: UUID) -> None:
        told.append(token)
        if len(told) == 4:
            all_told.set()

    listener = await store.listen(["default"], lambda _: None, on_cancel)
    try:
        retried, released, stopped, rescued = await store.insert_jobs(new(4))
        claims = {c.id: c for c in await store.claim_batch("default", 3, "w", LEASE)}
        [expiring] = await store.claim_batch("default", 1, "w", 0.01)
        claims[expiring.id] = expiring
        for job_id in (retried, released, rescued, stopped):
            assert await store.cancel_job(job_id) is JobStatus.RUNNING
        async with asyncio.timeout(5):
            await all_told.wait()
        assert sorted(told) == sorted(c.lease_token for c in claims.values())

        # A retry, a release, a rescue: each would make the job pending again.
        failed = ended(claims[retried], JobStatus.PENDING, delay=0.0, error="boom")
        assert await store.record_outcomes([failed]) == {retried}
        assert await store.release_jobs([(released, claims[released].lease_token)]) == {released}
        await expire()
        assert [(i, s) for i, _, s in await store.rescue_expired(10)] == [
            (rescued, JobStatus.CANCELLED)
        ]
        # The job caught the cancellation and returned what it had done so far.
        partial = ended(claims[stopped], JobStatus.CANCELLED, result='{"sent": 3}')
        assert await store.record_outcomes([partial]) == {stopped}
    finally:
        await listener.close()
    for job_id in (retried, released, rescued, stopped):
        record = await store.get_job(job_id)
        assert record is not None
        assert (record.status, record.finished_at is not None) == (JobStatus.CANCELLED, True)
        assert record.cancel_requested_at is not None
    stopped_record = await store.get_job(stopped)
    assert stopped_record is not None
    assert stopped_record.result == {"sent": 3}
    assert await store.claim_batch("default", 10, "w", LEASE) == []
    assert await store.retry_job(retried) is True  # runs again, no longer asked to stop
    [again] = await store.claim_batch("default", 10, "w", LEASE)
    assert await store.record_outcomes([ended(again, JobStatus.PENDING, delay=3600)]) == {retried}
    assert await store.job_status(retried) is JobStatus.PENDING


async def test_progress_is_fenced_by_the_lease_kept_by_the_outcome_and_reset_by_a_claim(
    store: Store,
) -> None:
    [job_id] = await store.insert_jobs(new())
    [stale] = await store.claim_batch("default", 1, "w", 0.01)
    assert await store.record_progress([(job_id, stale.lease_token, '{"done": 1}')]) == {job_id}
    await expire()
    await store.rescue_expired(10)
    [claim] = await store.claim_batch("default", 1, "w", LEASE)
    record = await store.get_job(job_id)
    assert record is not None
    assert record.progress is None  # a new attempt starts from nothing
    assert await store.record_progress([(job_id, stale.lease_token, '"stale"')]) == set()
    assert await store.record_progress([(job_id, claim.lease_token, '{"done": 2}')]) == {job_id}
    record = await store.get_job(job_id)
    assert record is not None
    assert record.progress == {"done": 2}
    last = Outcome(
        id=job_id,
        lease_token=claim.lease_token,
        status=JobStatus.SUCCEEDED,
        retry_delay=None,
        error=None,
        result=None,
        progress="1.0",
    )
    assert await store.record_outcomes([last]) == {job_id}
    record = await store.get_job(job_id)
    assert record is not None
    assert record.progress == 1.0


async def test_every_change_writes_its_event_and_retention_removes_them(store: Store) -> None:
    [job_id] = await store.insert_jobs(new(max_attempts=2))
    [first] = await store.claim_batch("default", 1, "w1", LEASE)
    failed = ended(first, JobStatus.PENDING, delay=0.0, error="boom")
    assert await store.record_outcomes([failed]) == {job_id}
    [second] = await store.claim_batch("default", 1, "w2", LEASE)
    assert await store.record_outcomes([ended(second, JobStatus.SUCCEEDED)]) == {job_id}
    events = await store.job_events(job_id)
    assert [(e.kind, e.status, e.attempt, e.worker_id) for e in events] == [
        (EventKind.ENQUEUED, JobStatus.PENDING, 0, None),
        (EventKind.CLAIMED, JobStatus.RUNNING, 1, "w1"),
        (EventKind.ATTEMPT_FAILED, JobStatus.PENDING, 1, "w1"),
        (EventKind.CLAIMED, JobStatus.RUNNING, 2, "w2"),
        (EventKind.SUCCEEDED, JobStatus.SUCCEEDED, 2, "w2"),
    ]
    assert events[2].error == "boom"
    assert events[2].run_at is not None
    assert all(a.at <= b.at for a, b in itertools.pairwise(events))
    await expire()
    assert (await store.prune_finished(0.01, 10)).deleted == 1
    assert await store.job_events(job_id) == []


async def test_each_attempt_is_told_as_claimed_before_its_events_however_it_ends(
    store: Store,
) -> None:
    """Stopped, released, given back by its worker, rescued: each attempt's claim comes before
    the events of that attempt, with its number, worker and time, while it runs and after
    (PostgreSQL reads it from the row, not from an event of its own: postgres/_history.py)."""
    [job_id] = await store.insert_jobs(new(max_attempts=5))

    def told(events: list[JobEvent]) -> list[tuple[EventKind, JobStatus, int, str | None]]:
        assert all(a.at <= b.at for a, b in itertools.pairwise(events))
        return [(e.kind, e.status, e.attempt, e.worker_id) for e in events]

    [first] = await store.claim_batch("default", 1, "w1", LEASE)
    assert await store.release_jobs([(job_id, first.lease_token)]) == {job_id}  # shutdown
    await store.claim_batch("default", 1, "w2", LEASE)
    assert await store.release_job(job_id, by="ops")
    await store.claim_batch("default", 1, "w3", 0.01)
    await expire()
    assert [rescued for rescued, _, _ in await store.rescue_expired(10)] == [job_id]
    [fourth] = await store.claim_batch("default", 1, "w4", LEASE)
    assert await store.cancel_job(job_id) is JobStatus.RUNNING
    so_far = [
        (EventKind.ENQUEUED, JobStatus.PENDING, 0, None),
        (EventKind.CLAIMED, JobStatus.RUNNING, 1, "w1"),
        (EventKind.RELEASED, JobStatus.PENDING, 0, "w1"),
        (EventKind.CLAIMED, JobStatus.RUNNING, 1, "w2"),
        (EventKind.RELEASED, JobStatus.PENDING, 0, "w2"),
        (EventKind.CLAIMED, JobStatus.RUNNING, 1, "w3"),
        (EventKind.RESCUED, JobStatus.PENDING, 1, "w3"),
        (EventKind.CLAIMED, JobStatus.RUNNING, 2, "w4"),
        (EventKind.CANCEL_REQUESTED, JobStatus.RUNNING, 2, "w4"),
    ]
    running = await store.job_events(job_id)
    assert told(running) == so_far
    assert await store.record_outcomes([ended(fourth, JobStatus.CANCELLED)]) == {job_id}
    finished = await store.job_events(job_id)
    assert told(finished) == [*so_far, (EventKind.CANCELLED, JobStatus.CANCELLED, 2, "w4")]
    assert finished[:-1] == running  # the running attempt's claim, as it was told then
    record = await store.get_job(job_id)
    assert record is not None
    assert record.started_at == finished[-3].at  # the claim's time is the attempt's start


async def test_with_events_off_only_what_the_job_row_says_is_there(store: Store) -> None:
    """`enqueued`, while an attempt runs its claim, and after a success the claim and the
    success: read from the job row, whatever the settings of the processes that made the
    changes (a reader's history then agrees with the record it reads next to it: the status
    route's stream relies on that). A failure is an event, written or not."""
    store.record_events = False
    [job_id] = await store.insert_jobs(new())
    [claim] = await store.claim_batch("default", 1, "w", LEASE)
    running = await store.job_events(job_id)
    assert [(e.kind, e.attempt, e.worker_id) for e in running] == [
        (EventKind.ENQUEUED, 0, None),
        (EventKind.CLAIMED, 1, "w"),
    ]
    assert await store.record_outcomes([ended(claim, JobStatus.SUCCEEDED)]) == {job_id}
    assert [e.kind for e in await store.job_events(job_id)] == [
        EventKind.ENQUEUED,
        EventKind.CLAIMED,
        EventKind.SUCCEEDED,
    ]
    [failing] = await store.insert_jobs(new())
    [claim] = await store.claim_batch("default", 1, "w", LEASE)
    assert await store.record_outcomes([ended(claim, JobStatus.FAILED, error="x")]) == {failing}
    assert [e.kind for e in await store.job_events(failing)] == [EventKind.ENQUEUED]


async def test_a_waiter_hears_only_of_the_finished_jobs_it_asked_about(store: Store) -> None:
    finished: list[int] = []
    heard = asyncio.Event()

    def on_finished(job_id: int) -> None:
        finished.append(job_id)
        heard.set()

    listener = await store.listen_for_outcomes(on_finished)
    try:
        wanted, _unwanted, retried = await store.insert_jobs(new(3))
        assert await store.want_outcome(wanted) is JobStatus.PENDING
        assert await store.want_outcome(retried) is JobStatus.PENDING
        assert await store.want_outcome(wanted + 1000) is None
        claims = await store.claim_batch("default", 3, "w", LEASE)
        await store.record_outcomes(
            [
                ended(c, JobStatus.PENDING, delay=3600, error="later")
                if c.id == retried
                else ended(c, JobStatus.SUCCEEDED)
                for c in claims
            ]
        )
        assert await store.want_outcome(wanted) is JobStatus.SUCCEEDED
        async with asyncio.timeout(5):
            await heard.wait()
        await asyncio.sleep(0.1)  # any other notification would have arrived by now
    finally:
        await listener.close()
    assert finished == [wanted]  # not the one nobody waits for, nor the one still pending


async def test_peek_shows_what_the_next_claim_takes_in_its_order_and_changes_nothing(
    store: Store,
) -> None:
    [low] = await store.insert_jobs(new(priority=0))
    [high] = await store.insert_jobs(new(priority=5))
    await store.insert_jobs(new(delay=3600))
    await store.insert_jobs(new(queue="other"))
    [low_too] = await store.insert_jobs(new(priority=0))
    peeked = await store.peek_jobs("default", 10, [])
    assert [r.id for r in peeked] == [high, low, low_too]
    assert [r.id for r in await store.peek_jobs("default", 2, [high])] == [low, low_too]
    assert all(r.status is JobStatus.PENDING and r.attempts == 0 for r in peeked)
    claims = await store.claim_batch("default", 2, "w", LEASE)
    assert sorted(c.id for c in claims) == sorted([high, low])


# -- retention, listing, counts ----------------------------------------------------------------


async def test_retention_deletes_only_jobs_finished_long_enough_ago(store: Store) -> None:
    ids = await store.insert_jobs(new(3))
    claims = await store.claim_batch("default", 2, "w", LEASE)
    await store.record_outcomes([ended(c, JobStatus.SUCCEEDED) for c in claims])
    assert (await store.prune_finished(3600, 10)).deleted == 0  # finished just now
    await expire()
    assert (await store.prune_finished(0.01, 1)).deleted == 1
    assert (await store.prune_finished(0.01, 10)).deleted == 1
    assert [r.id for r in await store.list_jobs(None, None, 10)] == [ids[2]]


async def test_lists_are_newest_first_and_filtered_and_counts_cover_every_status(
    store: Store,
) -> None:
    ids = await store.insert_jobs(new(3))
    [other] = await store.insert_jobs(new(queue="other"))
    await store.claim_batch("default", 1, "w", LEASE)
    assert [r.id for r in await store.list_jobs(None, None, 10)] == [other, *reversed(ids)]
    assert [r.id for r in await store.list_jobs(JobStatus.RUNNING, None, 10)] == [ids[0]]
    assert [r.id for r in await store.list_jobs(None, "other", 10)] == [other]
    assert [r.id for r in await store.list_jobs(None, None, 2)] == [other, ids[2]]
    counts = await store.count_by_status(None)
    assert counts == {**dict.fromkeys(JobStatus, 0), JobStatus.PENDING: 3, JobStatus.RUNNING: 1}
    assert await store.count_unfinished(["default"], 0, 0) == Unfinished(3, 0, 0)
    assert await store.count_unfinished(["other", "default"], 0, 0) == Unfinished(4, 0, 0)


@pytest.mark.parametrize("finished_after", [None, "bound"])
async def test_a_brief_list_shows_what_the_full_one_does_but_the_large_fields(
    store: Store, finished_after: str | None
) -> None:
    """The dashboard's list (`brief=True`): each job as the full list has it, but for its
    arguments, errors, result and progress, which a store may leave out (PostgreSQL does: a
    page of jobs with 1 MB of arguments each read them all), and an error that keeps its last
    line (what the list shows)."""
    large = '{"blob": "' + "x" * 200_000 + '"}'
    [job_id] = await store.insert_jobs(new(payload=large, max_attempts=1))
    [claim] = await store.claim_batch("default", 1, "w", LEASE)
    error = "Traceback (most recent call last):\n" + "  frame\n" * 5000 + "ValueError: no"
    await store.record_outcomes([ended(claim, JobStatus.FAILED, error=error)])
    bound = None if finished_after is None else datetime.now(UTC) - timedelta(hours=1)
    [full] = await store.list_jobs(None, None, 10, finished_after=bound)
    [brief] = await store.list_jobs(None, None, 10, finished_after=bound, brief=True)
    assert full.arguments == {"blob": "x" * 200_000}
    assert last_line(brief.last_error) == last_line(full.last_error) == "ValueError: no"
    assert brief.arguments in ({}, full.arguments)
    kept = ("arguments", "errors", "result", "progress", "last_error")
    assert {k: v for k, v in asdict(brief).items() if k not in kept} == {
        k: v for k, v in asdict(full).items() if k not in kept
    }
    assert brief.id == job_id


async def test_a_listener_hears_of_due_jobs_of_its_queues_only(store: Store) -> None:
    heard: list[str] = []
    woken = asyncio.Event()

    def on_notify(queue: str) -> None:
        heard.append(queue)
        woken.set()

    listener = await store.listen(["default"], on_notify)
    try:
        await store.insert_jobs(new(queue="other"))
        await store.insert_jobs(new(delay=3600))  # not due: nobody to wake
        await store.insert_jobs(new())
        async with asyncio.timeout(5):
            await woken.wait()
        assert await listener.alive(1.0)
    finally:
        await listener.close()
    assert heard == ["default"]


# -- what only PostgreSQL does -------------------------------------------------------------------


async def test_the_memory_store_refuses_to_join_a_transaction() -> None:
    with pytest.raises(MemoryStoreUnsupportedError, match="connection="):
        await MemoryStore().insert_jobs(new(), connection=object())


# -- the worker on either store, through `Jobs` --------------------------------------------------

attempts_seen: list[int] = []


@job(retry=Retry.fixed(max_attempts=3, delay=0.05))
async def flaky(n: int) -> dict[str, int]:
    me = current_job()
    assert me is not None
    attempts_seen.append(me.attempt)
    if me.attempt < 3:
        raise ConnectionError(f"try {me.attempt}")
    return {"n": n, "attempt": me.attempt}


@pytest.fixture
def jobs_dsn(postgres_dsn: str | None) -> str:
    return postgres_dsn or "memory://"


async def test_a_job_is_retried_by_its_policy_and_its_result_kept(jobs_dsn: str) -> None:
    attempts_seen.clear()
    async with Jobs(jobs_dsn, poll_interval=0.1) as jobs:
        job_id = await flaky.enqueue(n=7)
        await jobs.drain(timeout=10)
        record = await jobs.get(job_id)
    assert record is not None
    assert (record.status, record.attempts, record.result) == (
        JobStatus.SUCCEEDED,
        3,
        {"n": 7, "attempt": 3},
    )
    assert [e["error"].splitlines()[-1] for e in record.errors] == [
        "ConnectionError: try 1",
        "ConnectionError: try 2",
    ]
    assert attempts_seen == [1, 2, 3]


async def test_with_no_grace_a_job_of_a_name_no_worker_knows_fails_at_once(
    jobs_dsn: str,
) -> None:
    # With a grace, it waits for a worker that knows it: contract/test_deploy_aware_contract.py.
    async with Jobs(jobs_dsn, poll_interval=0.1, unknown_job_grace=0) as jobs:
        [job_id] = await jobs._ready_store.insert_jobs(
            new(name="nowhere.to.be.found", max_attempts=5)
        )
        await jobs.drain(timeout=10)
        record = await jobs.get(job_id)
    assert record is not None
    assert (record.status, record.attempts) == (JobStatus.FAILED, 1)
    assert "no job named 'nowhere.to.be.found'" in (record.last_error or "")
