"""The event loop's lag (`_loop_lag`): the smoothing of its samples, the limits it sets on each
queue, and the timer that takes the samples, driven with explicit samples and a fake clock. The
worker holding back on a blocked loop, on PostgreSQL: integration/test_loop_lag.py."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, cast

import pytest

from starlette_jobs.worker._loop_lag import (
    FALL,
    IDLE_TICK,
    PROBE_AFTER,
    RISE,
    TICK,
    LoopLag,
    LoopLagGuard,
    QueueLimits,
)

TARGET = 0.005
HIGH, LOW = 0.050, 0.0  # a loop blocked for 50 ms, and one that keeps up


def always(count: int) -> Callable[[str], int]:
    return lambda queue: count


def grown(limits: QueueLimits, times: int) -> None:
    """`times` samples of a loop that keeps up, each queue running as many jobs as it may."""
    for _ in range(times):
        limits.observe(LOW, lambda queue: limits.limits[queue])


# -- the smoothed lag -----------------------------------------------------------------------------


def test_the_lag_rises_by_half_of_a_late_sample_and_falls_by_a_fifth_of_an_early_one() -> None:
    lag = LoopLag()
    assert lag.add(0.010) == pytest.approx(0.010 * RISE)
    assert lag.add(0.010) == pytest.approx(0.010 * RISE + 0.010 * RISE * (1 - RISE))
    before = lag.seconds
    assert lag.add(0.0) == pytest.approx(before * (1 - FALL))


def test_one_blocked_tick_is_seen_at_once_and_forgotten_only_after_several() -> None:
    lag = LoopLag()
    assert lag.add(HIGH) > TARGET
    quick = 0
    while lag.add(LOW) > TARGET:
        quick += 1
    assert 3 <= quick <= 10  # ticks of a loop that keeps up before it counts as caught up


def test_a_timer_run_early_counts_as_on_time() -> None:
    lag = LoopLag()
    assert lag.add(-0.001) == 0.0


# -- the limits ---------------------------------------------------------------------------------


def test_each_queue_starts_with_one_job_and_grows_to_its_concurrency_while_the_loop_keeps_up() -> (
    None
):
    limits = QueueLimits({"small": 3, "big": 100}, TARGET)
    assert limits.limits == {"small": 1, "big": 1}
    steps = []
    while limits.limits["big"] < 100:
        grown(limits, 1)
        steps.append(limits.limits["big"])
    assert limits.limits == {"small": 3, "big": 100}
    assert steps[:4] == [2, 3, 4, 5]  # one at a time near the bottom
    assert len(steps) <= 25  # a quarter more at a time higher up


def test_a_limit_grows_only_while_it_is_what_holds_the_queue_back() -> None:
    limits = QueueLimits({"default": 10}, TARGET)
    grown(limits, 3)
    assert limits.limits["default"] == 4
    for _ in range(50):
        assert limits.observe(LOW, always(2)) == []  # two jobs run: the limit holds none back
    assert limits.limits["default"] == 4


def test_a_limit_halves_on_every_late_sample_down_to_one_job() -> None:
    limits = QueueLimits({"default": 100}, TARGET)
    grown(limits, 40)
    assert limits.limits["default"] == 100
    seen = []
    for _ in range(8):
        assert limits.observe(HIGH, always(100)) == []
        seen.append(limits.limits["default"])
    assert seen == [50, 25, 12, 6, 3, 1, 1, 1]


def test_a_limit_at_which_the_loop_fell_behind_is_tried_again_only_after_a_while() -> None:
    limits = QueueLimits({"default": 10}, TARGET)
    grown(limits, 3)
    assert limits.limits["default"] == 4
    for _ in range(3):  # the loop falls behind at 4; the lag stays high for a few samples
        limits.observe(HIGH, always(4))
    assert limits.limits["default"] == 1
    grown(limits, 10)
    assert limits.limits["default"] == 3  # just under the limit that made it late
    grown(limits, PROBE_AFTER - 11)
    assert limits.limits["default"] == 3
    grown(limits, 2)
    assert limits.limits["default"] > 4  # on time long enough: it tries its way up again


def test_a_loop_late_even_at_one_job_keeps_the_queue_at_one() -> None:
    limits = QueueLimits({"default": 10}, TARGET)
    for _ in range(PROBE_AFTER):
        limits.observe(HIGH, always(1))
        for _ in range(5):  # a few samples on time between two late ones
            limits.observe(LOW, always(1))
        assert limits.limits["default"] == 1


def test_a_queue_with_room_to_spare_when_the_loop_fell_behind_is_not_capped_for_it() -> None:
    limits = QueueLimits({"heavy": 10, "idle": 10}, TARGET)
    running = {"heavy": 4, "idle": 0}
    grown(limits, 3)
    limits.observe(HIGH, running.__getitem__)  # the heavy queue's jobs made it late
    grown(limits, 20)
    assert limits.limits == {"heavy": 3, "idle": 10}


def test_a_limit_grows_when_it_cut_a_claim_short_since_the_last_sample() -> None:
    recorder = Recorder()
    guard = guard_of(recorder)
    # Quick jobs: none runs when the samples come, but the limit cut each claim short.
    guard.observe(LOW)
    assert guard.limits.limits["default"] == 1  # nothing held back: it stays
    guard.held_back("default")
    guard.observe(LOW)
    assert guard.limits.limits["default"] == 2
    guard.observe(LOW)  # nothing held back since: it stays
    assert guard.limits.limits["default"] == 2
    guard.held_back("default")
    guard.observe(HIGH)  # a late loop wins
    assert guard.limits.limits["default"] == 1


def test_the_queues_whose_limit_rose_are_returned() -> None:
    limits = QueueLimits({"a": 5, "b": 5, "full": 1}, TARGET)
    running = {"a": 1, "b": 0, "full": 1}
    assert limits.observe(LOW, running.__getitem__) == ["a"]  # b holds back nothing; full is full
    assert limits.limits == {"a": 2, "b": 1, "full": 1}


def test_the_target_is_the_smoothed_lag_above_which_limits_shrink() -> None:
    limits = QueueLimits({"default": 10}, TARGET)
    grown(limits, 5)
    before = limits.limits["default"]
    limits.observe(TARGET, always(before))  # at the target: still keeping up
    assert limits.limits["default"] > before
    limits.observe(TARGET * 1.01, always(10))
    assert limits.limits["default"] < before + 1


# -- the guard ----------------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.running = {"default": 0}
        self.woken: list[str] = []


def guard_of(recorder: Recorder, target: float | None = TARGET, **queues: int) -> LoopLagGuard:
    return LoopLagGuard(
        queues or {"default": 10}, target, recorder.running.__getitem__, recorder.woken.append
    )


def test_the_room_of_a_queue_is_its_limit_less_what_runs() -> None:
    recorder = Recorder()
    guard = guard_of(recorder)
    assert guard.room("default") == 1
    recorder.running["default"] = 1
    assert guard.room("default") == 0
    for running in (1, 2, 3):
        recorder.running["default"] = running
        guard.observe(LOW)
    recorder.running["default"] = 1
    assert guard.room("default") == 3  # 4 allowed, 1 running
    guard.observe(HIGH)
    recorder.running["default"] = 4
    assert guard.room("default") == -2  # running jobs go on: none starts until two end


def test_a_raised_limit_wakes_the_queue_and_a_lowered_one_does_not() -> None:
    recorder = Recorder()
    guard = guard_of(recorder)
    recorder.running["default"] = 1
    guard.observe(LOW)
    recorder.running["default"] = 2
    guard.observe(LOW)
    assert recorder.woken == ["default", "default"]
    guard.observe(HIGH)
    assert recorder.woken == ["default", "default"]


def test_without_a_target_every_queue_may_run_its_concurrency_whatever_the_lag() -> None:
    recorder = Recorder()
    guard = guard_of(recorder, None, default=10, other=3)
    recorder.running["other"] = 1
    assert (guard.room("default"), guard.room("other")) == (10, 2)
    for _ in range(5):
        guard.observe(10.0)
    assert (guard.room("default"), guard.room("other")) == (10, 2)
    assert recorder.woken == []


def test_holding_back_and_catching_up_are_logged_once_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, "starlette_jobs.worker")
    guard = guard_of(Recorder())
    for sample in (HIGH, HIGH, HIGH, *[LOW] * 20):
        guard.observe(sample)
    above = [m for m in caplog.messages if "above the 5.0 ms target: starting fewer jobs" in m]
    under = [m for m in caplog.messages if "back under the 5.0 ms target" in m]
    assert (len(above), len(under)) == (1, 1)


class FakeLoop:
    """A loop's clock and timers, moved by hand."""

    def __init__(self) -> None:
        self.now = 100.0
        self.timers: list[tuple[float, Callable[..., None], tuple[Any, ...]]] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[..., None], *args: Any) -> Any:
        self.timers.append((when, callback, args))
        return asyncio.get_running_loop().call_later(3600, lambda: None)  # a handle to cancel

    def run_next_at(self, now: float) -> None:
        when, callback, args = self.timers.pop(0)
        assert now >= when
        self.now = now
        callback(*args)


async def test_each_tick_samples_how_late_the_timer_ran_and_sets_the_next_from_then() -> None:
    fake = FakeLoop()
    recorder = Recorder()
    guard = guard_of(recorder)
    recorder.running["default"] = 1
    due = fake.now + TICK
    # What `start` does, on the fake loop.
    guard._timer = fake.call_at(due, guard._tick, cast(asyncio.AbstractEventLoop, fake), due)
    fake.run_next_at(due)  # on time
    assert guard.lag.seconds == 0.0
    assert guard.room("default") == 1  # the limit rose to 2
    fake.run_next_at(fake.timers[0][0] + 0.040)  # 40 ms late: the loop was blocked
    assert guard.lag.seconds == pytest.approx(0.040 * RISE)
    assert guard.room("default") == 0  # halved back to 1
    assert fake.timers[0][0] == pytest.approx(fake.now + TICK)  # one sample, not a catch-up
    recorder.running["default"] = 0
    fake.run_next_at(fake.timers[0][0])
    assert fake.timers[0][0] == pytest.approx(fake.now + IDLE_TICK)  # nothing runs: fewer
    guard.stop()


async def test_a_late_tick_counts_in_proportion_to_how_long_the_jobs_held_the_loop() -> None:
    fake = FakeLoop()
    recorder = Recorder()
    held = [0.0006, 0.050]
    guard = LoopLagGuard(
        {"default": 10}, TARGET, recorder.running.__getitem__, recorder.woken.append,
        held_by_jobs=lambda: held.pop(0),
    )  # fmt: skip
    recorder.running["default"] = 1
    due = fake.now + TICK
    guard._timer = fake.call_at(due, guard._tick, cast(asyncio.AbstractEventLoop, fake), due)
    guard._sampled_at = fake.now
    # 40 ms late, 60 ms after the last sample, while the jobs held the loop for 0.6 ms of them:
    # the lateness is the app's but for a hundredth.
    fake.run_next_at(due + 0.040)
    assert guard.lag.seconds == pytest.approx(0.040 * 0.01 * RISE)
    assert guard.lag.seconds < TARGET
    # 30 ms late, the jobs holding the loop all the while: it counts whole.
    fake.run_next_at(fake.timers[0][0] + 0.030)
    assert guard.lag.seconds > TARGET
    guard.stop()


async def test_a_blocked_loop_is_seen_by_the_timer_and_a_stopped_guard_samples_no_more() -> None:
    recorder = Recorder()
    guard = guard_of(recorder)
    guard.start()
    time.sleep(TICK * 3)  # blocks the loop: the timer is due meanwhile  # noqa: ASYNC251
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert guard.lag.seconds >= TICK * RISE
    guard.stop()
    seen = guard.lag.seconds
    time.sleep(TICK * 2)  # noqa: ASYNC251
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert guard.lag.seconds == seen


async def test_without_a_target_the_guard_sets_no_timer() -> None:
    recorder = Recorder()
    guard = guard_of(recorder, None)
    guard.start()
    time.sleep(TICK * 2)  # noqa: ASYNC251
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert guard.lag.seconds == 0.0
    guard.stop()
