"""`RunningAttempts` (`_running`): the attempts a worker runs, one entry per lease token, and
how many more each queue may take."""

from __future__ import annotations

from uuid import uuid4

import pytest

from starlette_jobs._attempt_records import Claim
from starlette_jobs.worker._running import RunningAttempts


def claim(job_id: int, queue: str = "default") -> Claim:
    return Claim(
        id=job_id, name="app.job", queue=queue, payload="{}", attempts=1, max_attempts=3,
        lease_token=uuid4(), trace_context=None,
    )  # fmt: skip


def test_each_queue_has_its_own_limit() -> None:
    attempts: RunningAttempts[str] = RunningAttempts({"default": 2, "emails": 1})
    assert (attempts.free("default"), attempts.free("emails")) == (2, 1)
    attempts.start(claim(1), "task 1")
    assert (attempts.free("default"), attempts.free("emails")) == (1, 1)
    attempts.start(claim(2, "emails"), "task 2")
    assert (attempts.free("default"), attempts.free("emails")) == (1, 0)
    assert (attempts.count("default"), attempts.count("emails"), attempts.count()) == (1, 1, 2)


def test_an_ended_attempt_frees_its_slot() -> None:
    attempts: RunningAttempts[str] = RunningAttempts({"default": 1})
    first = claim(1)
    attempts.start(first, "task")
    attempts.end(first)
    assert attempts.free("default") == 1
    assert attempts.held() == []
    assert attempts.handle(first.lease_token) is None


def test_the_same_job_claimed_again_keeps_both_attempts() -> None:
    """A stale copy still running, and the job back under a new lease: neither overwrites the
    other, and the stale one counts against the queue until it ends."""
    attempts: RunningAttempts[str] = RunningAttempts({"default": 5})
    stale, again = claim(7), claim(7)
    attempts.start(stale, "stale task")
    attempts.start(again, "new task")
    assert attempts.free("default") == 3
    assert sorted(attempts.held()) == sorted([(7, stale.lease_token), (7, again.lease_token)])
    assert attempts.handle(stale.lease_token) == "stale task"
    assert attempts.handle(again.lease_token) == "new task"
    attempts.end(stale)
    assert attempts.held() == [(7, again.lease_token)]
    assert attempts.claims() == {"new task": again}


def test_a_lease_token_started_twice_is_a_bug_said_loudly() -> None:
    attempts: RunningAttempts[str] = RunningAttempts({"default": 5})
    first = claim(3)
    attempts.start(first, "task")
    with pytest.raises(RuntimeError, match=f"job 3: lease token {first.lease_token} claimed twice"):
        attempts.start(first, "task again")
    assert attempts.count() == 1


def test_claims_maps_each_handle_to_its_claim_across_queues() -> None:
    attempts: RunningAttempts[int] = RunningAttempts({"a": 2, "b": 2})
    one, two = claim(1, "a"), claim(2, "b")
    attempts.start(one, 10)
    attempts.start(two, 20)
    assert attempts.claims() == {10: one, 20: two}
    assert attempts.handle(uuid4()) is None


def test_a_queue_not_configured_is_refused() -> None:
    attempts: RunningAttempts[str] = RunningAttempts({"default": 1})
    with pytest.raises(KeyError):
        attempts.start(claim(1, "elsewhere"), "task")


def test_get_finds_an_attempt_and_its_claim_by_lease_token_in_any_queue() -> None:
    """What a cancel request (which names a lease token) needs: the task, and the job's name."""
    attempts: RunningAttempts[str] = RunningAttempts({"default": 2, "emails": 1})
    mail = claim(1, "emails")
    attempts.start(mail, "mail task")
    assert attempts.get(mail.lease_token) == ("mail task", mail)
    assert attempts.get(uuid4()) is None
    attempts.end(mail)
    assert attempts.get(mail.lease_token) is None
