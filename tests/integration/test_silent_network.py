"""A network that goes silent (packets dropped, sockets left open) or resets connections, between
the library and PostgreSQL, through `tests.faultproxy`.

A stopped server closes its sockets and is noticed at once; a dead route, a NAT or a firewall
that forgets a flow says nothing, and only a timeout notices it. What a user must see:

- a call of `Jobs` fails with `DatabaseUnavailableError` within `SILENT_BOUND`, and works again
  once the network heals;
- a worker notices a silently dead connection within a third of its lease (the heartbeat
  period), so no lease is lost to it, and gets back to work on new connections;
- a reset of any one connection costs nothing: no job lost, none run twice;
- shutdown on a silent network ends within `shutdown_bound` (docs/workers.md), leaving the
  jobs it could not release to lease expiry.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import pytest

from starlette_jobs import DatabaseUnavailableError, Jobs, Retry, current_job, job
from starlette_jobs.store._connectivity import STATEMENT_TIMEOUT
from starlette_jobs.worker._shutdown import shutdown_bound
from tests.faultproxy import FaultProxy, opened_before, ran

# The longest a call of `Jobs` may take on a silent network before it raises
# DatabaseUnavailableError: the client's statement timeout (docs/reliability.md says 10 s) and a
# little slack for a busy machine.
SILENT_BOUND = STATEMENT_TIMEOUT + 1.0
# The same slack over the documented bound of a shutdown.
SHUTDOWN_SLACK = 1.0
# Slack over lease/3 for a worker to be back at work: a reconnect and a claim on a busy machine.
RECOVERY_SLACK = 2.0
# How long a test waits for a call before recording it as hung: past every bound, under the
# per-test timeout, so that a failing run still reports every timing.
HUNG = 70.0

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


# -- what the jobs did, as the test sees it ----------------------------------------------------


@dataclass
class RunLog:
    """Every start and end of the jobs below, with `time.monotonic()` stamps."""

    starts: list[tuple[int, int, float]] = field(default_factory=list)  # n, attempt, at
    ends: list[tuple[int, int, float]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def record(self, into: list[tuple[int, int, float]], n: int) -> None:
        me = current_job()
        into.append((n, 0 if me is None else me.attempt, time.monotonic()))
        self.changed.set()

    def started(self, n: int) -> float | None:
        return next((at for m, _, at in self.starts if m == n), None)

    def times_started(self) -> Counter[int]:
        return Counter(n for n, _, _ in self.starts)

    async def wait_started(self, n: int, timeout: float) -> float:
        """When job `n` first started, waiting up to `timeout` seconds for it."""
        async with asyncio.timeout(timeout):
            while (at := self.started(n)) is None:
                self.changed.clear()
                await self.changed.wait()
        return at

    async def wait_ended(self, count: int, timeout: float) -> None:
        async with asyncio.timeout(timeout):
            while len(self.ends) < count:
                self.changed.clear()
                await self.changed.wait()


_log: RunLog | None = None


def log() -> RunLog:
    assert _log is not None, "the run_log fixture is not in use"
    return _log


@pytest.fixture
def run_log() -> RunLog:
    global _log
    _log = RunLog()
    return _log


@job(retry=Retry.fixed(max_attempts=3, delay=0.1))
async def step(n: int, seconds: float = 0.0) -> None:
    log().record(log().starts, n)
    await asyncio.sleep(seconds)
    log().record(log().ends, n)


@job(retry=Retry.fixed(max_attempts=3, delay=0.1))
async def hangs_on_first_attempt(n: int) -> None:
    log().record(log().starts, n)
    me = current_job()
    if me is not None and me.attempt == 1:
        await asyncio.Event().wait()
    log().record(log().ends, n)


# -- helpers -----------------------------------------------------------------------------------


@dataclass
class Timed:
    seconds: float
    outcome: object  # the result, or the exception raised, or "hung"

    def __str__(self) -> str:
        what = self.outcome
        if isinstance(what, BaseException):
            what = f"{type(what).__name__}: {str(what)[:150]}"
        return f"{self.seconds:6.1f} s  {what}"


async def timed(call: Callable[[], Awaitable[Any]]) -> Timed:
    started = time.monotonic()
    outcome: object
    try:
        async with asyncio.timeout(HUNG):
            outcome = await call()
    except TimeoutError as error:
        outcome = "hung" if time.monotonic() - started >= HUNG else error
    except Exception as error:
        outcome = error
    return Timed(time.monotonic() - started, outcome)


async def statuses(connection: asyncpg.Connection[Any]) -> dict[int, tuple[str, int, str | None]]:
    """id -> (status, attempts, last_error) of every job, read directly (not through the proxy)."""
    rows = await connection.fetch("SELECT id, status, attempts, last_error FROM starlette_jobs")
    return {row["id"]: (row["status"], row["attempts"], row["last_error"]) for row in rows}


async def until_finished(
    connection: asyncpg.Connection[Any], ids: list[int], timeout: float
) -> None:
    async with asyncio.timeout(timeout):
        while True:
            rows = await statuses(connection)
            if all(rows[i][0] in ("succeeded", "failed") for i in ids):
                return
            await asyncio.sleep(0.1)


def lease_lost(last_error: str | None) -> bool:
    return last_error is not None and last_error.startswith("lease expired")


# -- a: every call of Jobs -----------------------------------------------------------------------


async def test_every_call_on_a_silent_network_raises_unavailable_within_the_bound(
    fault_proxy: FaultProxy, run_log: RunLog
) -> None:
    async with Jobs(fault_proxy.dsn, queues={}) as jobs:
        ids = [await jobs.enqueue(step, n=n) for n in range(3)]
        # Warm up: several pool connections open at once, and the producer's own.
        await asyncio.gather(*(jobs.get(i) for i in ids * 3), jobs.list(), jobs.count_by_status())
        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "enqueue": lambda: jobs.enqueue(step, n=100),
            "get": lambda: jobs.get(ids[0]),
            "list": lambda: jobs.list(),
            "count_by_status": lambda: jobs.count_by_status(),
            "cancel": lambda: jobs.cancel(ids[1]),
        }
        fault_proxy.blackhole()
        silent = dict(zip(calls, await asyncio.gather(*map(timed, calls.values())), strict=True))
        fault_proxy.heal()
        healed = {name: await timed(call) for name, call in calls.items()}
    report = "\n".join(
        f"{name:16} silent: {silent[name]}\n{'':16} healed: {healed[name]}" for name in calls
    )
    print(report)
    assert all(
        isinstance(t.outcome, DatabaseUnavailableError) and t.seconds <= SILENT_BOUND
        for t in silent.values()
    ), f"on a silent network, within {SILENT_BOUND} s:\n{report}"
    assert not any(
        isinstance(t.outcome, BaseException) or t.outcome == "hung" for t in healed.values()
    ), f"after the network healed:\n{report}"


# -- b, c: a worker whose connections all went silent --------------------------------------------

LEASE = 6.0


async def test_a_busy_worker_notices_its_silent_connections_within_a_third_of_its_lease(
    fault_proxy: FaultProxy, database_dsn: str, connection: asyncpg.Connection[Any], run_log: RunLog
) -> None:
    async with (
        Jobs(database_dsn, queues={}) as producer,
        Jobs(fault_proxy.dsn, queues={"default": 5}, lease_duration=LEASE, poll_interval=1) as jobs,
    ):
        # Enough work for the whole test: 5 at a time, 0.3 s each.
        ids = await producer.enqueue_many(step, [{"n": n, "seconds": 0.3} for n in range(150)])
        await run_log.wait_ended(20, timeout=30)
        went_silent = time.monotonic()
        silenced = fault_proxy.blackhole(where=opened_before(went_silent))
        # Enqueued directly, ahead of the backlog: it starts as soon as the worker claims again.
        marker = await step.configure(priority=10, jobs=producer).enqueue(n=1000)
        try:
            started = await run_log.wait_started(1000, timeout=HUNG)
            stalled = f"{started - went_silent:.1f} s"
        except TimeoutError:
            started, stalled = went_silent + HUNG, f"over {HUNG:.0f} s"
        await until_finished(connection, [*ids, marker], timeout=HUNG)
        fault_proxy.heal()
        assert jobs.worker_id is not None
    rows = await statuses(connection)
    twice = {n for n, times in run_log.times_started().items() if times > 1}
    print(
        f"{len(silenced)} connections silenced; the worker was back at work after {stalled}; "
        f"{len(twice)} job(s) ran twice"
    )
    assert started - went_silent <= LEASE / 3 + RECOVERY_SLACK, (
        f"the worker stalled {stalled} on silent connections (lease {LEASE} s)"
    )
    assert all(rows[i][0] == "succeeded" for i in [*ids, marker]), "a job was lost or failed"
    # Only a job whose lease expired (and was rescued) may run again.
    honest = {n for n, job_id in enumerate(ids) if lease_lost(rows[job_id][2])}
    assert twice <= honest, f"jobs run twice without losing their lease: {sorted(twice - honest)}"


async def test_an_idle_worker_notices_its_silent_listen_connection_within_a_third_of_its_lease(
    fault_proxy: FaultProxy, database_dsn: str, connection: asyncpg.Connection[Any], run_log: RunLog
) -> None:
    # A 30 s poll: only LISTEN (or noticing it is dead) starts a new job sooner.
    async with (
        Jobs(database_dsn, queues={}) as producer,
        Jobs(fault_proxy.dsn, queues={"default": 5}, lease_duration=LEASE, poll_interval=30),
    ):
        await fault_proxy.wait_for(ran("LISTEN"))
        await producer.enqueue(step, n=1)
        await run_log.wait_started(1, timeout=10)  # every connection of the worker is warm
        await asyncio.sleep(1.0)  # the outcome is written; nothing runs
        went_silent = time.monotonic()
        fault_proxy.blackhole(where=opened_before(went_silent))
        job_id = await producer.enqueue(step, n=2)
        try:
            started = await run_log.wait_started(2, timeout=HUNG)
            idle = f"{started - went_silent:.1f} s"
        except TimeoutError:
            started, idle = went_silent + HUNG, f"over {HUNG:.0f} s"
        await until_finished(connection, [job_id], timeout=HUNG)
        fault_proxy.heal()
    print(f"the job enqueued after the network went silent started after {idle}")
    assert started - went_silent <= LEASE / 3 + RECOVERY_SLACK, (
        f"a new job waited {idle} for an idle worker on silent connections (lease {LEASE} s)"
    )
    assert run_log.times_started()[2] == 1


# -- d: a reset of each kind of connection --------------------------------------------------------

# The SQL that tells each connection of a worker apart (see starlette_jobs/postgres/sql/).
CONNECTION_KINDS = {
    "claims": "WITH picked AS",
    "outcomes": "AS outcome(id, lease_token",  # record_outcomes and record_successes
    "heartbeat": "SET lease_expires_at = now() + make_interval",
    "listen": "LISTEN",
    # Not "INSERT INTO starlette_jobs" alone: claims and outcomes insert their events too.
    "producer": "INSERT INTO starlette_jobs (name",
}


@pytest.mark.parametrize("kind", list(CONNECTION_KINDS))
async def test_a_reset_of_any_connection_of_a_working_worker_loses_nothing_and_runs_nothing_twice(
    kind: str, fault_proxy: FaultProxy, connection: asyncpg.Connection[Any], run_log: RunLog
) -> None:
    # A 30 s poll: a lost LISTEN connection shows as new jobs that wait.
    async with Jobs(
        fault_proxy.dsn, queues={"default": 5}, lease_duration=LEASE, poll_interval=30
    ) as jobs:
        # Long jobs keep the heartbeat going; short ones keep claims and outcomes going.
        first = await jobs.enqueue_many(step, [{"n": n, "seconds": 3.0} for n in range(2)])
        first += await jobs.enqueue_many(step, [{"n": n, "seconds": 0.2} for n in range(2, 40)])
        target = await fault_proxy.wait_for(ran(CONNECTION_KINDS[kind]), timeout=15)
        fault_proxy.reset(where=ran(CONNECTION_KINDS[kind]))
        reset_at = time.monotonic()
        # The app's own enqueues, on the producer connection. One may fail, as documented, in
        # the library's words; enqueued again under a unique key, it is stored once.
        refused = 0

        async def enqueue(n: int) -> int:
            nonlocal refused
            options = step.configure(unique_key=f"after-{n}", jobs=jobs)
            for _ in range(3):
                try:
                    return await options.enqueue(n=n, seconds=0.2)
                except DatabaseUnavailableError:
                    refused += 1
            raise AssertionError(f"enqueue refused 3 times after a reset of the {kind} connection")

        after = [await enqueue(n) for n in range(100, 110)]
        try:
            started = await run_log.wait_started(109, timeout=HUNG)
            waited = f"{started - reset_at:.1f} s"
        except TimeoutError:
            started, waited = reset_at + HUNG, f"over {HUNG:.0f} s"
        await until_finished(connection, [*first, *after], timeout=HUNG)
    rows = await statuses(connection)
    twice = sorted(n for n, times in run_log.times_started().items() if times > 1)
    print(
        f"reset {target!r}: the last job enqueued after it started after {waited}; "
        f"ran twice: {twice}; enqueues refused: {refused}; "
        f"jobs with an attempt used up: {sum(1 for i in [*first, *after] if rows[i][1] > 1)}"
    )
    assert all(rows[i][0] == "succeeded" for i in [*first, *after]), "a job was lost or failed"
    assert twice == [], f"jobs run twice after a reset of the {kind} connection: {twice}"
    # The jobs enqueued after the reset run behind the 40 before it (about 3 s of work on the
    # free slots): their wait is counted from the reset, or from when the last of those 40
    # started, whichever is later. The reset may also have lost the NOTIFY of those 40 (a
    # LISTEN reset as they were enqueued): the first of them to start after the reset is held
    # to the same bound.
    backlog = [at for n, _, at in run_log.starts if n < 100]
    after_reset = [at - reset_at for at in backlog if at > reset_at]
    assert not after_reset or min(after_reset) <= LEASE / 3 + RECOVERY_SLACK, (
        f"after a reset of the {kind} connection, waiting jobs waited {min(after_reset):.1f} s"
    )
    assert started - max([reset_at, *backlog]) <= LEASE / 3 + RECOVERY_SLACK, (
        f"after a reset of the {kind} connection, new jobs waited {waited} (poll 30 s)"
    )


@job(retry=Retry.none())
async def once(n: int) -> None:
    log().record(log().starts, n)
    log().record(log().ends, n)


async def test_a_claim_whose_answer_is_lost_still_runs_the_job(
    fault_proxy: FaultProxy, database_dsn: str, connection: asyncpg.Connection[Any], run_log: RunLog
) -> None:
    # At least once: a job the server leased to a worker that never heard of it (the claim's
    # answer was lost with its connection) must still run, even with no retry to spare.
    async with (
        Jobs(database_dsn, queues={}) as producer,
        Jobs(fault_proxy.dsn, queues={"default": 1}, lease_duration=LEASE, poll_interval=30),
    ):
        await producer.enqueue(step, n=0)
        await run_log.wait_ended(1, timeout=10)
        claimer = await fault_proxy.wait_for(ran(CONNECTION_KINDS["claims"]))
        claimer.delay = 0.5  # each way: the answer is on the wire for half a second
        job_id = await producer.enqueue(once, n=1)
        query = "SELECT status FROM starlette_jobs WHERE id = $1"
        async with asyncio.timeout(10):
            while await connection.fetchval(query, job_id) != "running":  # noqa: ASYNC110
                await asyncio.sleep(0.02)  # no event to wait on: the row, read directly
        claimed = time.monotonic()
        claimer.reset()  # the server ran the claim; its answer is lost
        await until_finished(connection, [job_id], timeout=LEASE * 3)
        finished = time.monotonic() - claimed
    status, attempts, last_error = (await statuses(connection))[job_id]
    print(
        f"claim answer lost: {status} after {finished:.1f} s, {attempts} attempt(s), {last_error}"
    )
    assert run_log.times_started()[1] == 1, (
        f"the job never ran: {status} after {finished:.1f} s ({last_error})"
    )
    assert status == "succeeded"


# -- e: shutdown on a silent network ---------------------------------------------------------------

GRACE = 2.0


async def test_shutdown_on_a_silent_network_ends_within_the_grace_and_the_bound(
    fault_proxy: FaultProxy, database_dsn: str, connection: asyncpg.Connection[Any], run_log: RunLog
) -> None:
    jobs = Jobs(fault_proxy.dsn, queues={"default": 5}, lease_duration=LEASE, shutdown_grace=GRACE)
    async with jobs:
        ids = await jobs.enqueue_many(hangs_on_first_attempt, [{"n": n} for n in range(3)])
        for n in range(3):
            await run_log.wait_started(n, timeout=10)
        fault_proxy.blackhole()
        stopping = time.monotonic()
    took = time.monotonic() - stopping
    fault_proxy.heal()
    left = await statuses(connection)
    # Nothing is lost: another worker runs them once the leases expire.
    async with Jobs(database_dsn, queues={"default": 5}, lease_duration=LEASE) as other:
        await other.drain(timeout=LEASE * 3)
    rows = await statuses(connection)
    print(f"shutdown with a {GRACE} s grace on a silent network took {took:.1f} s")
    assert took <= shutdown_bound(GRACE, LEASE) + SHUTDOWN_SLACK, f"shutdown took {took:.1f} s"
    # Not released (the network was silent): still running, under a lease that expires.
    assert all(left[i][0] in ("running", "pending") for i in ids), left
    assert all(rows[i][0] == "succeeded" for i in ids), rows
