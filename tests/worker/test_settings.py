"""A worker's id, and the durations a drain may wait (`worker/_settings.py`). What a drain does
with them is in test_worker.py and test_jobs.py."""

from __future__ import annotations

import math
import os
import socket

import pytest

from starlette_jobs.worker._settings import check_drain_durations, drain_horizon, new_worker_id


def test_a_worker_id_names_its_host_and_process_and_is_unique() -> None:
    host, pid, suffix = new_worker_id().rsplit(":", 2)
    assert (host, pid) == (socket.gethostname(), str(os.getpid()))
    assert len(suffix) == 8
    assert int(suffix, 16) >= 0
    assert new_worker_id() != new_worker_id()


@pytest.mark.parametrize("value", [math.nan, -1.0, -math.inf, "10"])
def test_a_drain_refuses_durations_it_cannot_wait_for(value: object) -> None:
    with pytest.raises(ValueError, match="timeout must be a number of seconds >= 0"):
        check_drain_durations(value, 0.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retry_wait must be a number of seconds >= 0"):
        check_drain_durations(1.0, value)  # type: ignore[arg-type]


def test_a_drain_may_wait_for_ever_or_not_at_all() -> None:
    check_drain_durations(math.inf, 0)
    check_drain_durations(0, math.inf)


def test_a_drain_looks_ahead_no_further_than_its_time_left() -> None:
    assert drain_horizon(remaining=5.0, wait=60.0) == 5.0
    assert drain_horizon(remaining=120.0, wait=60.0) == 60.0
    assert drain_horizon(remaining=-1.0, wait=60.0) == 0.0  # past the deadline: due now only
    assert drain_horizon(remaining=math.inf, wait=math.inf) is None  # any pending job
