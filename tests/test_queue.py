"""`Queue`, `QueueLimits` and `QueueControls` (`_queue.py`): what `Jobs(queues=...)` accepts and
refuses, and what a bare int means."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from starlette_jobs import JobDefinitionError, Jobs, Queue, QueueControls, QueueLimits
from starlette_jobs._queue import as_queue, declared_queues


def test_a_bare_int_is_a_queues_concurrency_with_no_limit() -> None:
    assert as_queue(7) == Queue(concurrency=7)
    assert not as_queue(7).limits.limited
    limited = Queue(concurrency=10, global_limit=4)
    assert as_queue(limited) is limited
    assert limited.limits == QueueLimits(global_limit=4)
    assert limited.limits.limited


def test_jobs_takes_ints_and_queues_side_by_side() -> None:
    jobs = Jobs(queues={"default": 10, "exports": Queue(concurrency=3, global_limit=2)})
    assert declared_queues(jobs.config.queues) == {
        "default": Queue(concurrency=10),
        "exports": Queue(concurrency=3, global_limit=2),
    }
    assert declared_queues(jobs.replace(queues={"x": 2}).config.queues) == {
        "x": Queue(concurrency=2)
    }


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"concurrency": 0}, "concurrency must be a positive integer, at most 10000, got 0"),
        ({"concurrency": True}, "concurrency must be a positive integer"),
        ({"concurrency": 10_001}, "concurrency must be a positive integer"),
        ({"global_limit": 0}, "global_limit must be None or a positive integer"),
        ({"global_limit": 2.0}, "global_limit must be None or a positive integer"),
        ({"global_limit": False}, "global_limit must be None or a positive integer"),
    ],
)
def test_a_queue_out_of_range_is_refused_naming_the_setting(
    arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(JobDefinitionError, match=message):
        Queue(**arguments)


def test_jobs_refuses_what_is_neither_an_int_nor_a_queue() -> None:
    with pytest.raises(JobDefinitionError, match=r"queue 'x': .* or a Queue\(...\), got '4'"):
        Jobs(queues={"x": "4"})  # type: ignore[dict-item]


def test_controls_are_values() -> None:
    assert QueueControls("a") == QueueControls("a", paused=False, limits=QueueLimits())
    with pytest.raises(dataclasses.FrozenInstanceError):
        QueueControls("a").paused = True  # type: ignore[misc]


def test_a_key_limit_names_the_argument_and_how_many_per_value() -> None:
    limited = Queue(key="customer_id", key_limit=2)
    assert limited.limits == QueueLimits(key="customer_id", key_limit=2)
    assert limited.limits.limited
    for arguments in ({"key": "customer_id"}, {"key_limit": 2}):
        with pytest.raises(JobDefinitionError, match="key and key_limit go together"):
            Queue(**arguments)
    with pytest.raises(JobDefinitionError, match="key must be the name of an argument"):
        Queue(key="customer-id", key_limit=1)
    with pytest.raises(JobDefinitionError, match="key_limit must be None or a positive integer"):
        Queue(key="customer_id", key_limit=0)


def test_a_rate_limit_is_a_count_of_starts_in_a_period_of_seconds() -> None:
    limited = Queue(rate_limit=10, rate_period=60)
    assert limited.limits == QueueLimits(rate_limit=10, rate_period=60)
    assert limited.limits.limited
    assert not Queue(rate_period=5).limits.limited  # a period alone limits nothing
    for period in (0.001, 86_401, float("nan"), True, "1"):
        with pytest.raises(JobDefinitionError, match="rate_period must be a number of seconds"):
            Queue(rate_limit=1, rate_period=period)  # type: ignore[arg-type]
    with pytest.raises(JobDefinitionError, match="rate_limit must be None or a positive"):
        Queue(rate_limit=0)
