"""`jobs.pause`, `jobs.resume` and `jobs.queue_controls` (`_queue_controls.py`) as a caller meets
them: checked names, a Jobs not started, an outage named. What they do to workers:
contract/test_controls_contract.py, worker/test_controls.py and processes/test_limits.py."""

from __future__ import annotations

import pytest

from starlette_jobs import DatabaseUnavailableError, JobDefinitionError, Jobs, NotStartedError
from starlette_jobs.testing import simulate_outage


async def test_pause_and_resume_read_back_through_queue_controls() -> None:
    async with Jobs("memory://", queues={}) as jobs:
        assert not (await jobs.queue_controls("emails")).paused
        await jobs.pause("emails")
        assert (await jobs.queue_controls("emails")).paused
        await jobs.resume("emails")
        assert not (await jobs.queue_controls("emails")).paused


async def test_a_queue_name_no_queue_can_have_is_refused() -> None:
    async with Jobs("memory://", queues={}) as jobs:
        for call in (jobs.pause, jobs.resume, jobs.queue_controls):
            with pytest.raises(JobDefinitionError, match="invalid queue name 'a b'"):
                await call("a b")


async def test_a_jobs_not_started_says_so() -> None:
    with pytest.raises(NotStartedError):
        await Jobs("memory://").pause("emails")


async def test_an_outage_names_what_was_being_done() -> None:
    async with Jobs("memory://", queues={}) as jobs:
        expected = pytest.raises(DatabaseUnavailableError, match="could not pause queue 'emails'")
        with simulate_outage(jobs), expected:
            await jobs.pause("emails")
