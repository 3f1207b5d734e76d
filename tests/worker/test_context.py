"""`current_job()` (`_context`): the running job inside its attempt, None outside one, and each
task sees its own."""

from __future__ import annotations

import asyncio
import threading

import pytest

from starlette_jobs import RunningJob, current_job
from starlette_jobs.worker._context import AttemptControl, running

FIRST = RunningJob(id=1, name="app.first", queue="default", attempt=1, max_attempts=3)
SECOND = RunningJob(id=2, name="app.second", queue="emails", attempt=2, max_attempts=2)


def test_outside_a_job_there_is_no_current_job() -> None:
    assert current_job() is None


def test_the_job_is_current_within_the_block_and_no_longer_after() -> None:
    with running(FIRST):
        assert current_job() is FIRST
    assert current_job() is None


def test_blocks_nest_and_each_restores_the_one_before() -> None:
    with running(FIRST):
        with running(SECOND):
            assert current_job() is SECOND
        assert current_job() is FIRST
    assert current_job() is None


def test_an_exception_in_the_block_still_restores_the_previous_job() -> None:
    with pytest.raises(ZeroDivisionError), running(FIRST):
        1 / 0  # noqa: B018
    assert current_job() is None


async def test_concurrent_attempts_each_see_their_own_job() -> None:
    both_inside = asyncio.Barrier(2)

    async def attempt(me: RunningJob) -> RunningJob | None:
        with running(me):
            await both_inside.wait()  # the other task has entered its own block meanwhile
            return current_job()

    assert list(await asyncio.gather(attempt(FIRST), attempt(SECOND))) == [FIRST, SECOND]


def test_a_running_job_is_read_only() -> None:
    with pytest.raises(AttributeError):
        FIRST.attempt = 2  # type: ignore[misc]


# -- asked to stop, and progress -----------------------------------------------------------------


def test_a_job_is_not_asked_to_stop_until_the_worker_says_so() -> None:
    control = AttemptControl()
    me = RunningJob(id=3, name="app.third", queue="default", attempt=1, max_attempts=1,
                    _control=control)  # fmt: skip
    assert not me.cancel_requested
    assert control.request_cancel()
    assert me.cancel_requested
    assert not control.request_cancel()  # once only: a second request changes nothing
    assert me.cancel_requested


async def test_a_sync_job_in_its_thread_sees_the_request() -> None:
    control = AttemptControl()
    me = RunningJob(id=3, name="app.third", queue="default", attempt=1, max_attempts=1,
                    _control=control)  # fmt: skip
    in_thread = threading.Event()

    def sync_job() -> int:
        job = current_job()
        assert job is not None
        in_thread.set()
        spins = 0
        while not job.cancel_requested:
            spins += 1
        return spins

    with running(me):
        # to_thread copies the context: the thread's current job is the attempt's.
        task = asyncio.ensure_future(asyncio.to_thread(sync_job))
    await asyncio.to_thread(in_thread.wait, 10)
    control.request_cancel()
    assert await asyncio.wait_for(task, 10) >= 0


def test_progress_is_handed_to_the_worker_as_json_text() -> None:
    reported: list[str] = []
    me = RunningJob(id=3, name="app.third", queue="default", attempt=1, max_attempts=1,
                    _control=AttemptControl(reported.append))  # fmt: skip
    me.report_progress(0.5)
    me.report_progress({"stage": "upload", "done": 3, "total": 10})
    me.report_progress("almost")
    me.report_progress(None)
    assert reported == ["0.5", '{"stage":"upload","done":3,"total":10}', '"almost"', "null"]


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (object(), "not JSON: Unable to serialize unknown type"),
        ({"a": ["\x00"]}, "a.0: holds a NUL character"),
        ({"k": "\ud800"}, "k: holds a lone surrogate"),
        (float("nan"), "(the value): NaN and infinity are not storable as JSON"),
        (10**4301, "(the value): an integer of more than 4300 digits cannot be read back"),
        ([[[[[[[[[[]]]]]]]]]], None),  # ten levels: fine
    ],
    ids=["object", "nul", "lone-surrogate", "nan", "huge-integer", "ten-levels"],
)
def test_progress_postgresql_cannot_store_is_refused_with_a_clear_error(
    value: object, says: str | None
) -> None:
    reported: list[str] = []
    me = RunningJob(id=3, name="app.third", queue="default", attempt=1, max_attempts=1,
                    _control=AttemptControl(reported.append))  # fmt: skip
    if says is None:
        me.report_progress(value)
        assert len(reported) == 1
        return
    with pytest.raises(ValueError, match="job 3: progress not storable: ") as raised:
        me.report_progress(value)
    assert says in str(raised.value)
    assert reported == []


def test_progress_too_deep_to_read_back_is_refused() -> None:
    deep: list[object] = []
    for _ in range(70):
        deep = [deep]
    with pytest.raises(ValueError, match="nested deeper than 64 levels"):
        FIRST.report_progress(deep)


def test_outside_a_worker_progress_is_checked_and_goes_nowhere() -> None:
    FIRST.report_progress({"ok": True})  # e.g. a RunningJob built in a test
    assert not FIRST.cancel_requested


PROGRESS_LIMIT = 64 * 1024  # bytes of JSON, as docs/progress.md says


def test_progress_over_the_size_limit_is_refused_naming_its_size_and_the_limit() -> None:
    reported: list[str] = []
    me = RunningJob(id=3, name="app.third", queue="default", attempt=1, max_attempts=1,
                    _control=AttemptControl(reported.append))  # fmt: skip
    me.report_progress("x" * (PROGRESS_LIMIT - 2))  # its quotes make it just fit
    with pytest.raises(ValueError, match="job 3: progress not storable: ") as raised:
        me.report_progress("x" * (PROGRESS_LIMIT - 1))
    assert "65,537 bytes of JSON, over the limit of 65,536 bytes" in str(raised.value)
    assert [len(text) for text in reported] == [PROGRESS_LIMIT]
