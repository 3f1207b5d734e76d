"""Listing jobs on both stores (`jobs.list`, what `starlette-jobs list` shows): most recent
first, filtered by status, queue and job name together, and paged by the last id seen."""

from __future__ import annotations

import pytest

from starlette_jobs import Jobs, JobStatus
from starlette_jobs.store._protocol import Store
from tests.records import new_jobs


async def test_jobs_are_listed_newest_first_filtered_by_name_and_queue(store: Store) -> None:
    mail = await store.insert_jobs(new_jobs(3, name="mail.send", queue="mail"))
    reports = await store.insert_jobs(new_jobs(2, name="reports.build", queue="mail"))
    other = await store.insert_jobs(new_jobs(1, name="mail.send", queue="other"))

    listed = await store.list_jobs(None, "mail", 10, "mail.send")
    assert [job.id for job in listed] == sorted(mail, reverse=True)
    assert [job.id for job in await store.list_jobs(None, None, 10, "mail.send")] == sorted(
        [*mail, *other], reverse=True
    )
    assert [job.id for job in await store.list_jobs(None, "mail", 10)] == sorted(
        [*mail, *reports], reverse=True
    )
    assert await store.list_jobs(JobStatus.FAILED, None, 10, "mail.send") == []
    assert await store.list_jobs(None, None, 10, "no.such.job") == []


async def test_pages_follow_on_from_the_last_id_seen(store: Store) -> None:
    ids = await store.insert_jobs(new_jobs(7))
    newest_first = sorted(ids, reverse=True)
    pages: list[list[int]] = []
    before: int | None = None
    while page := await store.list_jobs(None, None, 3, None, before):
        pages.append([job.id for job in page])
        before = page[-1].id
    assert pages == [newest_first[:3], newest_first[3:6], newest_first[6:]]


@pytest.mark.parametrize("before", [0, -1, "x", True])
async def test_a_page_after_what_is_no_job_id_is_refused(jobs_dsn: str, before: object) -> None:
    async with Jobs(jobs_dsn) as jobs:
        with pytest.raises(ValueError, match="before must be a job id"):
            await jobs.list(before=before)  # type: ignore[arg-type]


async def test_a_window_of_ids_lists_only_those_between_after_and_before(jobs_dsn: str) -> None:
    async with Jobs(jobs_dsn, queues={}) as jobs:
        store = jobs._ready_store
        ids = sorted(await store.insert_jobs(new_jobs(6, name="mail.send")))
        between = await jobs.list(name="mail.send", before=ids[4], after=ids[1])
        assert [job.id for job in between] == [ids[3], ids[2]]
        assert [job.id for job in await jobs.list(after=ids[4])] == [ids[5]]
        with pytest.raises(ValueError, match="after must be a job id"):
            await jobs.list(after=-1)
