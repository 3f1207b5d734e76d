"""Testing your own jobs: a pytest plugin, and helpers that read well in a test.

Enable the plugin in your `conftest.py`, one line:

    pytest_plugins = ["starlette_jobs.testing"]

Fixtures:

- `jobs_database`: the URL of a fresh, migrated database for this test alone, cloned from a
  template migrated once per test session. The session's databases live on the server in
  `DATABASE_URL` (new databases, dropped at the end) or, without it, on an embedded PostgreSQL
  in a temporary directory: never your dev server's data directory.
- `jobs_memory`: a `memory://` URL of an in-memory store of this test's own, for fast tests
  that need no database.

Helpers, for a test that enqueued something (through its app, say):

- `await run_enqueued(jobs)` (or `run_enqueued_now(client)` from a sync test with Starlette's
  `TestClient`): runs every job enqueued so far, and those they enqueue, until nothing is due
  (retries due within a minute included), even when the app's own `Jobs` runs no worker
  (`queues={}`).
- `await assert_enqueued(jobs, job, **arguments)` (or `assert_enqueued_now(client, ...)`): the
  job enqueued with these arguments, or an `AssertionError` that lists what was enqueued
  instead.
- `with eager(jobs):`: every job enqueued in the block runs before `enqueue` returns.
- `with simulate_outage(jobs):` (on `memory://`): the store fails as an unavailable database
  does, for the block, a number of calls or a time.

docs/testing.md shows them at work.
"""

from __future__ import annotations

from ..memory._outage import SimulatedOutage as SimulatedOutage
from ._fixtures import jobs_database as jobs_database
from ._fixtures import jobs_memory as jobs_memory
from ._fixtures import jobs_server as jobs_server
from ._fixtures import jobs_template_database as jobs_template_database
from ._helpers import assert_enqueued as assert_enqueued
from ._helpers import assert_enqueued_now as assert_enqueued_now
from ._helpers import eager as eager
from ._helpers import run_enqueued as run_enqueued
from ._helpers import run_enqueued_now as run_enqueued_now
from ._helpers import simulate_outage as simulate_outage

__all__ = [
    "SimulatedOutage",
    "assert_enqueued",
    "assert_enqueued_now",
    "eager",
    "jobs_database",
    "jobs_memory",
    "jobs_server",
    "jobs_template_database",
    "run_enqueued",
    "run_enqueued_now",
    "simulate_outage",
]
