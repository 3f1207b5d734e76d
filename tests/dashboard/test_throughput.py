"""The overview's throughput (`dashboard/_throughput.py`): every minute of the window, a minute
with nothing included, the bars scaled to the busiest minute; read through `Jobs` after a drain
(on the in-memory store; the page's test runs on PostgreSQL: test_app.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from starlette_jobs import Jobs, Retry, ThroughputMinute, job
from starlette_jobs.dashboard._throughput import (
    BAR_HEIGHT,
    WINDOW_MINUTES,
    queue_throughput,
    recent_throughput,
)

NOW = datetime(2026, 11, 26, 7, 30, 40, tzinfo=UTC)


def _at(ago: int) -> datetime:
    return datetime(2026, 11, 26, 7, 30, tzinfo=UTC) - timedelta(minutes=ago)


def test_every_minute_of_the_window_has_a_bar_oldest_first() -> None:
    rows = [
        ThroughputMinute("mail", _at(0), 10, 2, 1),
        ThroughputMinute("mail", _at(3), 39, 1, 0),
        ThroughputMinute("mail", _at(WINDOW_MINUTES), 500, 0, 0),  # before the window
    ]
    shown = queue_throughput(rows, NOW)
    assert [bar.minute for bar in shown.minutes] == [_at(ago) for ago in range(14, -1, -1)]
    assert (shown.finished, shown.failed, shown.retried) == (52, 3, 1)
    last, busiest = shown.minutes[-1], shown.minutes[-4]
    assert (busiest.height, busiest.failed_height) == (BAR_HEIGHT, 1)
    assert (last.finished, last.height, last.failed_height) == (12, 7, 1)
    assert shown.minutes[0].height == 0
    assert [bar.x for bar in shown.minutes[:3]] == [0, 4, 8]
    assert (shown.width, shown.bar_width) == (4 * WINDOW_MINUTES, 3)


def test_a_queue_with_nothing_finished_has_empty_bars() -> None:
    shown = queue_throughput([], NOW)
    assert (shown.finished, shown.failed) == (0, 0)
    assert {bar.height for bar in shown.minutes} == {0}


@job(queue="rate-page", retry=Retry.none())
async def fails() -> None:
    raise RuntimeError("down")


@job(queue="rate-page")
async def works() -> None:
    pass


async def test_after_a_drain_each_queue_shows_what_ran() -> None:
    async with Jobs("memory://", queues={"rate-page": 2}) as jobs:
        for _ in range(4):
            await works.enqueue()
        await fails.enqueue()
        await jobs.drain()
        shown = await recent_throughput(jobs, ["rate-page", "idle"], datetime.now(UTC))
    assert (shown["rate-page"].finished, shown["rate-page"].failed) == (5, 1)
    assert (shown["idle"].finished, len(shown["idle"].minutes)) == (0, WINDOW_MINUTES)
