"""The job list bounded by a time (`jobs.list(finished_after=...)`, docs/dashboard.md, "The job
list"): the jobs finished at or after it, most recent (by id) first, paged by id.

Paging by id and bounding by `finished_at` pull against each other: a page scanned by id finds
its jobs at once where the bound matches many of them, but scans the whole table where it
matches few (a bound of the last minute, a page past the last match), and the index on
`finished_at` finds few at once but many slowly. So the store asks the index first, for at most
`FEW` ids of the jobs the bound matches below the page's `before`: fewer came back, and those
are every match left, the page is drawn from them (so a page past the last match reads at most
`FEW` rows, never the table); else the bound is wide and the page scans by id, where matches
are dense. What stays slow: a wide bound whose other filters (status, queue, name) match none
of the rows below `before`, the scan by id then walks them all, as a filter by name alone does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

from .._records import JobRecord, JobStatus

# At most this many ids read from the index before the list scans by id instead: reading them
# takes a few milliseconds on 1,000,000 finished jobs (benchmarks/dashboard.py, "since").
FEW = 5000

Read = Callable[..., Awaitable[Any]]


async def list_finished_after(
    read: Read,
    q: Mapping[str, str],
    filters: tuple[
        JobStatus | None,
        str | None,
        int,
        str | None,
        int | None,
        str | None,
        str | None,
        int | None,
    ],
    finished_after: datetime,
) -> list[JobRecord]:
    """`list_jobs` with a time bound. `filters`: status, queue, limit, name, before, trace id,
    correlation id, after."""
    before, after = filters[4], filters[7]
    found = await read("fetch", q["finished_since"], finished_after, FEW, before, after)
    ids = [row[0] for row in found]
    if len(ids) < FEW:
        rows = await read("fetch", q["list_jobs_among"], *filters, ids)
    else:
        rows = await read("fetch", q["list_finished_jobs"], *filters, finished_after)
    return [JobRecord._from_row(row) for row in rows]
