"""`_since`: the PostgreSQL job list bounded by a time takes the same jobs whichever way it
reads them, from the few ids the finished index gives, or by id where the bound is wide (what
both stores list: contract/test_since_contract.py; how fast: benchmarks/dashboard.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from starlette_jobs import JobStatus
from starlette_jobs.postgres import _since
from starlette_jobs.postgres._store import PostgresStore
from tests.contract.test_since_contract import older_and_newer
from tests.records import new_jobs


@pytest.fixture
async def store(database_dsn: str) -> AsyncIterator[PostgresStore]:
    opened = await PostgresStore.open(database_dsn, min_size=1, max_size=2)
    yield opened
    await opened.close()


@pytest.mark.parametrize("few", [1, 3, 4, 5000])
async def test_both_ways_list_the_same_jobs(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch, few: int
) -> None:
    monkeypatch.setattr(_since, "FEW", few)  # 1 and 3: the bound matches "many"
    _, newer, bound = await older_and_newer(store, queue="mail")
    await store.insert_jobs(new_jobs(1, queue="mail"))  # unfinished: matches no bound
    pages = []
    before = None
    while page := await store.list_jobs(
        JobStatus.FAILED, "mail", 2, None, before, finished_after=bound
    ):
        pages.append([job.id for job in page])
        before = page[-1].id
    newest_first = sorted(newer, reverse=True)
    assert pages == [newest_first[:2], newest_first[2:]]
