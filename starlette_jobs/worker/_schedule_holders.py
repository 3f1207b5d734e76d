"""Whose definition of a schedule holds while workers of two versions of the code run at once
(docs/schedules.md, "Deploys"): the registry lists the schedules each worker's code declares,
and a worker takes its own definitions back (`_ticker.Ticker`) only once no other live worker's
code holds the stored ones."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from .._schedule_records import DeclaredSchedule, StoredSchedule
from ..store._protocol import Store


def defined_otherwise(hashes: Mapping[str, str], stored: Mapping[str, StoredSchedule]) -> list[str]:
    """The names of the schedules of `hashes` (a worker's code: name -> definition hash) that
    the database holds another definition of, or none."""
    return [
        name
        for name, definition_hash in hashes.items()
        if (row := stored.get(name)) is None or row.definition_hash != definition_hash
    ]


async def held_by_no_other(
    store: Store, worker_id: str, names: Sequence[str], stored: Mapping[str, StoredSchedule]
) -> list[str]:
    """Of `names` (the schedules of `worker_id`'s code stored otherwise, or not at all), those
    whose stored form the code of no other live worker holds: whoever wrote it has stopped.

    A worker whose code defines a schedule as stored, or (for one deleted) declares schedules
    but not that one, keeps its form: `worker_id` stands by, as the old workers of a deploy do
    for the new code's, and as the new ones do while an old one restarted after them runs.
    Workers whose code declares no schedule have no say. Not in the registry itself (not yet,
    or no longer), `worker_id` cannot tell, and stands by.
    """
    listed = await store.worker_schedules()
    if worker_id not in listed:
        return []
    others = [held for worker, held in listed.items() if worker != worker_id and held]

    def held(name: str) -> bool:
        row = stored.get(name)
        if row is None:
            return any(name not in theirs for theirs in others)
        return any(theirs.get(name) == row.definition_hash for theirs in others)

    return [name for name in names if not held(name)]


def as_declared(row: StoredSchedule) -> DeclaredSchedule:
    """A stored schedule as its declaration wrote it, to declare again unchanged (its hash,
    kept as stored, is what the store compares: the row stays as it is)."""
    definition = json.dumps(row.definition, sort_keys=True, separators=(",", ":"))
    return DeclaredSchedule(row.name, definition, row.definition_hash)
