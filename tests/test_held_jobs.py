"""The jobs a request holds back (`_held_jobs.py`), without the middleware: what is written, and
what the request is answered when the write fails. The middleware around it, on both stores and
through real requests, is tested in web/test_on_success.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from starlette_jobs import DatabaseUnavailableError, OnSuccessError
from starlette_jobs._held_jobs import Refusal, holding, request_jobs
from starlette_jobs._records import NewJobs
from starlette_jobs.memory._store import MemoryStore
from tests.records import new_jobs


class _Unreachable(MemoryStore):
    async def insert_reserved(self, batch: Sequence[NewJobs]) -> set[int]:
        raise DatabaseUnavailableError("could not write: the database is down")


async def _held_on(store: MemoryStore) -> tuple[list[int], Refusal | None]:
    """Holds one job on `store` in a request that answers 200; its ids, and the refusal."""
    with holding():
        held = request_jobs(store)
        new = new_jobs()
        ids, taken = await store.reserve_ids(new)
        assert not taken
        held.hold(store, replace(new, ids=tuple(ids)))
        return ids, await held.respond(200)


def test_outside_a_request_nothing_can_be_held() -> None:
    with pytest.raises(OnSuccessError, match="add OnSuccessMiddleware"):
        request_jobs(MemoryStore())


async def test_a_success_writes_what_was_held() -> None:
    store = MemoryStore()
    ids, refusal = await _held_on(store)
    assert refusal is None
    assert [record.id for record in await store.list_jobs(None, None, 10)] == ids


async def test_an_unavailable_database_asks_the_client_to_try_again_soon() -> None:
    store = _Unreachable()
    _, refusal = await _held_on(store)
    assert refusal == Refusal(503, "the jobs of this request could not be written; try again", True)
    assert await store.list_jobs(None, None, 10) == []


async def test_a_request_that_ended_drops_what_it_held() -> None:
    store = MemoryStore()
    with holding() as held:
        new = new_jobs()
        ids, _ = await store.reserve_ids(new)
        held.hold(store, replace(new, ids=tuple(ids)))
    assert await held.respond(200) is None  # nothing left to write
    assert await store.list_jobs(None, None, 10) == []
