"""`store/_history.place_claim`: where an attempt's claim goes in a history when it is read from
elsewhere than an event of its own (the stores' histories: contract/test_store_contract.py,
postgres/test_history.py). Histories written as processes with different `events` settings
leave them: some events missing, which must not move a claim before an earlier attempt's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from starlette_jobs import EventKind, JobStatus
from starlette_jobs._records import JobEvent
from starlette_jobs.store._history import claim_event, place_claim

T0 = datetime(2026, 11, 27, 12, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def event(kind: EventKind, status: JobStatus, attempt: int, seconds: float) -> JobEvent:
    return JobEvent(job_id=1, kind=kind, at=at(seconds), status=status, attempt=attempt)


ENQUEUED = event(EventKind.ENQUEUED, JobStatus.PENDING, 0, 0)


def told(events: list[JobEvent]) -> list[tuple[EventKind, int]]:
    return [(e.kind, e.attempt) for e in events]


def test_a_claim_goes_before_the_stop_requests_of_its_attempt() -> None:
    history = [ENQUEUED, event(EventKind.CANCEL_REQUESTED, JobStatus.RUNNING, 1, 2)]
    place_claim(history, claim_event(1, at(1), 1, "w", None))
    assert told(history) == [
        (EventKind.ENQUEUED, 0),
        (EventKind.CLAIMED, 1),
        (EventKind.CANCEL_REQUESTED, 1),
    ]


def test_a_claim_does_not_go_before_an_earlier_attempts_stop_request() -> None:
    """Attempt 1 was asked to stop, then ended and was retried by processes that record no
    events: the claim of attempt 2 goes after attempt 1's request, where its time puts it."""
    history = [ENQUEUED, event(EventKind.CANCEL_REQUESTED, JobStatus.RUNNING, 1, 2)]
    place_claim(history, claim_event(1, at(5), 2, "w", None))
    assert told(history)[1:] == [(EventKind.CANCEL_REQUESTED, 1), (EventKind.CLAIMED, 2)]


def test_an_attempt_given_back_and_claimed_again_under_its_number_is_told_in_time_order() -> None:
    """Released (its attempt given back) by a process that records no events: the next claim
    has the same number as the request to stop the one before, and comes after it."""
    history = [ENQUEUED, event(EventKind.CANCEL_REQUESTED, JobStatus.RUNNING, 1, 2)]
    place_claim(history, claim_event(1, at(5), 1, "w", None))
    assert told(history)[1:] == [(EventKind.CANCEL_REQUESTED, 1), (EventKind.CLAIMED, 1)]


def test_a_claim_recorded_as_an_event_is_told_once() -> None:
    history = [
        ENQUEUED,
        claim_event(1, at(1), 1, "w", None),
        event(EventKind.CANCEL_REQUESTED, JobStatus.RUNNING, 1, 2),
    ]
    place_claim(history, claim_event(1, at(1), 1, "w", None))
    assert told(history) == [
        (EventKind.ENQUEUED, 0),
        (EventKind.CLAIMED, 1),
        (EventKind.CANCEL_REQUESTED, 1),
    ]


def test_an_earlier_attempts_recorded_claim_does_not_hide_a_later_one() -> None:
    """A claim recorded as an event (before migration 0017), its attempt rescued by a process
    that records no events; attempt 2's claim is told all the same."""
    history = [ENQUEUED, claim_event(1, at(1), 1, "old", None)]
    place_claim(history, claim_event(1, at(9), 2, "new", None))
    assert told(history) == [
        (EventKind.ENQUEUED, 0),
        (EventKind.CLAIMED, 1),
        (EventKind.CLAIMED, 2),
    ]
