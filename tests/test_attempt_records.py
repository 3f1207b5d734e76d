"""What a worker and the store hand each other (`_attempt_records`): a claim is read-only, an
outcome is built by keyword, and the worker's fast way of building one gives the same outcome."""

from __future__ import annotations

import dataclasses
from uuid import uuid4

import pytest

from starlette_jobs import JobStatus
from starlette_jobs._attempt_records import Claim, Outcome, outcome_of_attempt


def test_claims_are_frozen_and_outcomes_built_by_keyword_only() -> None:
    claim = Claim(
        id=1, name="n", queue="q", payload="{}", attempts=1, max_attempts=3,
        lease_token=uuid4(), trace_context=None,
    )  # fmt: skip
    with pytest.raises(TypeError):
        Outcome(1, claim.lease_token, JobStatus.SUCCEEDED, None, None, None)  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        claim.attempts = 2  # type: ignore[misc]


def test_the_workers_outcome_is_the_one_built_by_keyword() -> None:
    """`outcome_of_attempt` sets each field itself, for speed: a field added to `Outcome` and
    not to it would be missing from every attempt's outcome."""
    token = uuid4()
    fast = outcome_of_attempt(7, token, JobStatus.PENDING, 1.5, "boom", None, True)
    named = Outcome(
        id=7, lease_token=token, status=JobStatus.PENDING, retry_delay=1.5, error="boom",
        result=None, of_workflow=True,
    )  # fmt: skip
    assert fast == named
    assert [getattr(fast, f.name) for f in dataclasses.fields(Outcome)] == [
        getattr(named, f.name) for f in dataclasses.fields(Outcome)
    ]
    assert type(fast) is Outcome
    assert outcome_of_attempt(1, token, JobStatus.SUCCEEDED, None, None, "1", False).result == "1"
