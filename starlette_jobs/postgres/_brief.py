"""Brief rows: the statements that read jobs for a page that shows a line of each (the
dashboard's job list, a workflow's steps), reading only what such a page shows.

A page of 50 jobs whose arguments are 900 kB each read 45 MB and took 225 ms where it shows a
line of each (2.5 ms brief); a workflow's page, and the page of each of its steps, read every
step whole, once a second while it runs. A brief row's large fields come back empty
(`Store.list_jobs` says which); its error, as its last 2,000 characters, from which a page shows
the last line. The brief statements are the whole ones with another column list, so that the
two cannot drift apart in what they filter.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

_WHOLE = "SELECT * FROM starlette_jobs"
_BRIEF = """SELECT id, name, queue, status, '{}' AS payload, priority, attempts, max_attempts,
       run_at, created_at, started_at, finished_at, right(last_error, 2000) AS last_error,
       '[]' AS errors, worker_id, NULL AS result, NULL AS progress, cancel_requested_at,
       scheduled_for, workflow_id, step, upstream, trace_context
  FROM starlette_jobs"""
# The statements that have a brief form: the job list's (sql/queries.sql) and a workflow's steps.
READS = ("list_jobs", "list_jobs_among", "list_finished_jobs", "workflow_steps")


@cache
def _brief(statements: tuple[str, ...]) -> tuple[str, ...]:
    briefs = tuple(text.replace(_WHOLE, _BRIEF, 1) for text in statements)
    if any(brief == text for brief, text in zip(briefs, statements, strict=True)):
        raise AssertionError(f"a statement of {READS} no longer reads `{_WHOLE}`")
    return briefs


def brief_reads(q: Mapping[str, str]) -> Mapping[str, str]:
    """`q` (the store's statements) with those of `READS` reading brief rows."""
    return {**q, **dict(zip(READS, _brief(tuple(q[name] for name in READS)), strict=True))}
