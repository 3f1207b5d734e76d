"""The contract of what requests need of a store, on PostgreSQL and memory alike: idempotency
keys (held by a job of one name for as long as it is kept), and ids reserved before the jobs
are written (the on-success enqueue of `_on_success.py`). The rest of the store contract is in
test_store_contract.py."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from starlette_jobs import IdempotencyKeyReusedError, JobStatus
from starlette_jobs._records import NewJobs
from starlette_jobs.store._protocol import Store
from tests.records import new_jobs as new
from tests.records import outcome as ended

LEASE = 30.0


async def reserve(store: Store, jobs: NewJobs) -> NewJobs:
    """`jobs` with the ids the store reserved for them."""
    ids, taken = await store.reserve_ids(jobs)
    assert not taken
    return replace(jobs, ids=tuple(ids))


# -- idempotency keys ----------------------------------------------------------------------------


async def test_an_idempotency_key_is_held_after_the_job_finished_until_it_is_pruned(
    store: Store,
) -> None:
    [first] = await store.insert_jobs(new(idempotency_key="k"))
    assert await store.insert_jobs(new(idempotency_key="k")) == [first]
    [claim] = await store.claim_batch("default", 1, "w", LEASE)
    await store.record_outcomes([ended(claim, JobStatus.SUCCEEDED)])
    # A unique key would be free now; an idempotency key still names the finished job.
    assert await store.insert_jobs(new(idempotency_key="k")) == [first]
    assert (await store.count_by_status(None))[JobStatus.SUCCEEDED] == 1
    await asyncio.sleep(0.01)
    assert (await store.prune_finished(0.001, 10)).deleted == 1
    [second] = await store.insert_jobs(new(idempotency_key="k"))
    assert second != first


async def test_an_idempotency_key_is_held_per_job_name(store: Store) -> None:
    [receipt] = await store.insert_jobs(new(name="tests.receipt", idempotency_key="k"))
    [invoice] = await store.insert_jobs(new(name="tests.invoice", idempotency_key="k"))
    assert receipt != invoice
    assert await store.insert_jobs(new(name="tests.invoice", idempotency_key="k")) == [invoice]


async def test_a_job_with_both_keys_returns_the_holder_of_either(store: Store) -> None:
    [live] = await store.insert_jobs(new(unique_key="u"))
    assert await store.insert_jobs(new(unique_key="u", idempotency_key="i")) == [live]
    [keyed] = await store.insert_jobs(new(idempotency_key="i"))
    assert keyed != live
    assert await store.insert_jobs(new(unique_key="other", idempotency_key="i")) == [keyed]


async def test_an_idempotency_key_given_again_with_the_same_arguments_returns_its_job(
    store: Store,
) -> None:
    [first] = await store.insert_jobs(new(payload='{"order": 7, "note": "x"}', idempotency_key="k"))
    # The same arguments as JSON values: key order and spacing are no difference.
    again = new(payload='{"note":"x","order":7}', idempotency_key="k")
    assert await store.insert_jobs(again) == [first]
    assert await store.reserve_ids(again) == ([first], True)
    assert [r.id for r in await store.list_jobs(None, None, 10)] == [first]


async def test_an_idempotency_key_given_again_with_other_arguments_is_refused(
    store: Store,
) -> None:
    [first] = await store.insert_jobs(new(payload='{"order": 7}', idempotency_key="k"))
    other = new(payload='{"order": 8}', idempotency_key="k")
    with pytest.raises(IdempotencyKeyReusedError) as raised:
        await store.reserve_ids(other)
    assert (raised.value.job_id, raised.value.job_name) == (first, "tests.jobs")
    assert raised.value.idempotency_key == "k"
    [after], _ = await store.reserve_ids(new())
    assert after == first + 1  # the refused reservation took no id
    with pytest.raises(IdempotencyKeyReusedError, match=rf"held by job {first}, .*different"):
        await store.insert_jobs(other)
    # Nothing written; and the key still gives its job for its own arguments.
    assert await store.insert_jobs(new(payload='{"order": 7}', idempotency_key="k")) == [first]
    assert [r.id for r in await store.list_jobs(None, None, 10)] == [first]


async def test_other_arguments_are_refused_after_the_job_finished_too(store: Store) -> None:
    [first] = await store.insert_jobs(new(payload='{"order": 7}', idempotency_key="k"))
    [claim] = await store.claim_batch("default", 1, "w", LEASE)
    await store.record_outcomes([ended(claim, JobStatus.SUCCEEDED)])
    with pytest.raises(IdempotencyKeyReusedError):
        await store.insert_jobs(new(payload='{"order": 8}', idempotency_key="k"))
    assert await store.insert_jobs(new(payload='{"order": 7}', idempotency_key="k")) == [first]


@pytest.mark.parametrize(
    ("stored", "given", "same"),
    [
        ('{"n": 1}', '{"n": 1.0}', True),  # numbers by value, as jsonb compares them
        ('{"n": [1, {"a": null, "b": "x"}]}', '{"n": [1, {"b": "x", "a": null}]}', True),
        ('{"n": 1}', '{"n": true}', False),
        ('{"n": 0.1}', '{"n": 0.10000000000000001}', False),
        ('{"n": [1, 2]}', '{"n": [2, 1]}', False),
        ('{"n": 1}', '{"n": 1, "m": null}', False),  # an argument given is not one left out
        ('{"n": "é"}', '{"n": "\\u00e9"}', True),
    ],
)
async def test_arguments_are_the_same_when_their_json_values_are(
    store: Store, stored: str, given: str, same: bool
) -> None:
    [first] = await store.insert_jobs(new(payload=stored, idempotency_key="k"))
    if same:
        assert await store.insert_jobs(new(payload=given, idempotency_key="k")) == [first]
    else:
        with pytest.raises(IdempotencyKeyReusedError):
            await store.insert_jobs(new(payload=given, idempotency_key="k"))


async def test_other_arguments_with_the_key_of_another_job_name_are_another_job(
    store: Store,
) -> None:
    [receipt] = await store.insert_jobs(
        new(name="tests.receipt", payload='{"order": 7}', idempotency_key="k")
    )
    [invoice] = await store.insert_jobs(
        new(name="tests.invoice", payload='{"order": 8}', idempotency_key="k")
    )
    assert receipt != invoice
    with pytest.raises(IdempotencyKeyReusedError, match=f"held by job {receipt},"):
        await store.insert_jobs(
            new(name="tests.receipt", payload='{"order": 8}', idempotency_key="k")
        )


async def test_a_unique_key_returns_its_live_job_whatever_the_arguments(store: Store) -> None:
    [live] = await store.insert_jobs(new(payload='{"order": 7}', unique_key="u"))
    assert await store.insert_jobs(new(payload='{"order": 8}', unique_key="u")) == [live]
    assert await store.reserve_ids(new(payload='{"order": 8}', unique_key="u")) == ([live], True)
    # With both keys, each held by another job: the idempotency key's holder, arguments checked.
    [keyed] = await store.insert_jobs(new(payload='{"order": 9}', idempotency_key="i"))
    both = new(payload='{"order": 9}', unique_key="u", idempotency_key="i")
    assert await store.insert_jobs(both) == [keyed]
    assert await store.reserve_ids(both) == ([keyed], True)
    with pytest.raises(IdempotencyKeyReusedError, match=f"held by job {keyed},"):
        await store.insert_jobs(replace(both, payloads=['{"order": 7}']))


# -- ids reserved, jobs written later ------------------------------------------------------------


async def test_reserved_ids_are_written_as_given_and_a_gap_is_harmless(store: Store) -> None:
    [before] = await store.insert_jobs(new())
    forgotten, taken = await store.reserve_ids(new(2))  # never written: a gap
    assert taken is False
    receipt = new(name="tests.receipt", payload='{"n": 1}')
    invoice = new(name="tests.invoice", queue="billing", delay=3600)
    receipt_ids, _ = await store.reserve_ids(receipt)
    invoice_ids, _ = await store.reserve_ids(invoice)
    [after] = await store.insert_jobs(new())
    ids = [before, *forgotten, *receipt_ids, *invoice_ids, after]
    assert ids == sorted(set(ids))  # each id once, in the order they were asked for
    assert await store.get_job(receipt_ids[0]) is None  # not written yet

    written = await store.insert_reserved(
        [replace(receipt, ids=tuple(receipt_ids)), replace(invoice, ids=tuple(invoice_ids))]
    )
    assert written == {*receipt_ids, *invoice_ids}
    first = await store.get_job(receipt_ids[0])
    second = await store.get_job(invoice_ids[0])
    assert first is not None
    assert second is not None
    assert (first.name, first.arguments, first.status) == ("tests.receipt", {"n": 1}, "pending")
    assert (second.name, second.queue) == ("tests.invoice", "billing")
    claimed = await store.claim_batch("default", 10, "w", LEASE)
    assert sorted(c.id for c in claimed) == [before, receipt_ids[0], after]  # not the delayed


async def test_a_reservation_with_a_held_key_returns_its_holder_and_reserves_nothing(
    store: Store,
) -> None:
    [holder] = await store.insert_jobs(new(idempotency_key="k"))
    assert await store.reserve_ids(new(idempotency_key="k")) == ([holder], True)
    [live] = await store.insert_jobs(new(unique_key="u"))
    assert await store.reserve_ids(new(unique_key="u")) == ([live], True)
    [next_id], taken = await store.reserve_ids(new())
    assert (next_id, taken) == (live + 1, False)  # the two look-ups reserved nothing


async def test_a_batch_with_a_key_taken_meanwhile_writes_none_of_its_jobs(store: Store) -> None:
    reserved = [
        await reserve(store, n) for n in (new(idempotency_key="k"), new(unique_key="u"), new())
    ]
    # A request that ran at the same time took one of the keys first.
    [other] = await store.insert_jobs(new(idempotency_key="k"))
    assert await store.insert_reserved(reserved) == set()
    assert [r.id for r in await store.list_jobs(None, None, 10)] == [other]  # all or nothing
    # Without the taken key, the same batch is written whole.
    assert await store.insert_reserved(reserved[1:]) == {*reserved[1].ids, *reserved[2].ids}
    assert await store.insert_jobs(new(unique_key="u")) == list(reserved[1].ids)


async def test_a_batch_that_holds_one_key_twice_writes_none_of_its_jobs(store: Store) -> None:
    reserved = [await reserve(store, new(unique_key="u")) for _ in range(2)]
    assert await store.insert_reserved(reserved) == set()
    assert await store.list_jobs(None, None, 10) == []
