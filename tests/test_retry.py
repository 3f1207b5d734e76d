from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from starlette_jobs import JobDefinitionError, Retry
from starlette_jobs._retry import delay_after_failure


def test_fixed_waits_the_same_delay_and_gives_up_after_max_attempts() -> None:
    policy = Retry.fixed(max_attempts=3, delay=2.5)
    assert [policy.next_delay(attempt) for attempt in (1, 2, 3)] == [2.5, 2.5, None]


def test_exponential_doubles_from_the_base_delay_up_to_the_cap() -> None:
    policy = Retry.exponential(max_attempts=10, base_delay=1.0, max_delay=10.0, jitter=0.0)
    delays = [policy.next_delay(attempt) for attempt in range(1, 11)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0, 10.0, 10.0, None]


def test_none_runs_once() -> None:
    policy = Retry.none()
    assert policy.max_attempts == 1
    assert policy.next_delay(1) is None


def test_jitter_takes_at_most_its_share_off_the_delay() -> None:
    policy = Retry.exponential(max_attempts=5, base_delay=4.0, max_delay=100.0, jitter=0.25)
    assert policy.next_delay(1, lambda: 0.0) == 4.0
    assert policy.next_delay(1, lambda: 0.999999) == pytest.approx(3.0, abs=1e-5)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Retry.fixed(max_attempts=0),
        lambda: Retry.fixed(delay=-1.0),
        lambda: Retry.exponential(base_delay=-0.1),
        lambda: Retry.exponential(jitter=1.5),
    ],
)
def test_invalid_policies_are_refused(make: object) -> None:
    with pytest.raises(ValueError, match=r"."):
        make()  # type: ignore[operator]


TEN_YEARS = 10 * 365 * 24 * 3600.0


@pytest.mark.parametrize(
    ("make", "phrase"),
    [
        # max_attempts is stored in an `integer` column.
        (lambda: Retry.fixed(max_attempts=2**31), "from 1 to 2147483647"),
        (lambda: Retry.exponential(max_attempts=-(2**31) - 1), "from 1 to 2147483647"),
        (lambda: Retry.fixed(max_attempts=True), "an integer"),
        (lambda: Retry.fixed(max_attempts=2.5), "an integer"),  # type: ignore[arg-type]
        # A retry time PostgreSQL cannot hold would keep the failed attempt from being recorded.
        (lambda: Retry.fixed(delay=1e13), "at most 315360000"),
        (lambda: Retry.exponential(base_delay=TEN_YEARS + 1), "at most 315360000"),
        (lambda: Retry.exponential(max_delay=1e300), "at most 315360000"),
        (lambda: Retry.fixed(delay=math.nan), "finite"),
        (lambda: Retry.exponential(jitter=math.nan), "jitter"),
    ],
)
def test_policies_the_database_cannot_hold_are_refused_as_definition_errors(
    make: Callable[[], Retry], phrase: str
) -> None:
    with pytest.raises(JobDefinitionError, match=phrase) as raised:
        make()
    assert isinstance(raised.value, ValueError)  # what these raised before


def test_the_largest_policies_allowed_are_accepted() -> None:
    policy = Retry.exponential(max_attempts=2**31 - 1, base_delay=TEN_YEARS, max_delay=TEN_YEARS)
    assert policy.next_delay(2**31 - 2, lambda: 0.0) == TEN_YEARS


policies = st.one_of(
    st.builds(
        Retry.fixed,
        max_attempts=st.integers(1, 50),
        delay=st.floats(0, 3600),
        jitter=st.floats(0, 1),
    ),
    st.builds(
        Retry.exponential,
        max_attempts=st.integers(1, 200),
        base_delay=st.floats(0, 600),
        max_delay=st.floats(0, 86400),
        jitter=st.floats(0, 1),
    ),
    st.just(Retry.none()),
)


@given(policy=policies, attempt=st.integers(1, 10_000), fraction=st.floats(0, 1, exclude_max=True))
def test_delays_are_never_negative_never_above_the_cap_and_jitter_stays_in_bound(
    policy: Retry, attempt: int, fraction: float
) -> None:
    delay = policy.next_delay(attempt, lambda: fraction)
    if attempt >= policy.max_attempts:
        assert delay is None
        return
    assert delay is not None
    unjittered = policy.next_delay(attempt, lambda: 0.0)
    assert unjittered is not None
    assert 0.0 <= delay <= unjittered <= policy.max_delay
    assert delay >= unjittered * (1 - policy.jitter) - 1e-9


@given(policy=policies, attempt=st.integers(1, 500))
def test_exponential_delays_never_shrink_from_one_attempt_to_the_next(
    policy: Retry, attempt: int
) -> None:
    this, following = (policy.next_delay(a, lambda: 0.0) for a in (attempt, attempt + 1))
    if this is not None and following is not None:
        assert following >= this


@pytest.mark.parametrize(
    ("attempt", "max_attempts", "error", "expected"),
    [
        (1, 3, ValueError("boom"), 2.0),
        (2, 3, ValueError("boom"), 2.0),
        (3, 3, ValueError("boom"), None),  # no attempt left
        (1, 1, ValueError("boom"), None),  # the row's max_attempts wins over the policy's
        (3, 5, ValueError("boom"), 2.0),  # also when it allows more (the policy lowered since)
        (4, 5, ValueError("boom"), 2.0),
        (5, 5, ValueError("boom"), None),
        (1, 3, KeyError("gone"), None),  # non-retryable, even with attempts left
        (1, 3, LookupError("parent"), 2.0),  # only the declared types and their subclasses
    ],
)
def test_the_retry_decision_weighs_attempts_left_and_non_retryable_errors(
    attempt: int, max_attempts: int, error: BaseException, expected: float | None
) -> None:
    policy = Retry.fixed(max_attempts=3, delay=2.0)
    assert delay_after_failure(policy, attempt, max_attempts, error, (KeyError,)) == expected
