"""The job lifecycle as a state machine: random sequences of every operation, on the real SQL.

Hypothesis plays several workers and an operator against `Store` (the statements the worker
runs) and, after every step, checks the rows against a model: one holder per running job, stale
lease tokens refused, attempts never above `max_attempts`, terminal states left only through
`retry`, one live job per unique key, and each job's events (`Store.job_events`) exactly the
transitions the model went through, each with the status and attempt count it left the row
in. Each simulated worker keeps the real worker's bookkeeping
(`RunningAttempts`): a job released or rescued while its worker runs it can come back to that
worker, which must still know every running row it holds, and leave none at a clean shutdown.
Tests of one query at a time cannot find the orderings that would break these; this searches
for them.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, TypeVar
from uuid import UUID

import asyncpg
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from starlette_jobs import JobStatus
from starlette_jobs._attempt_records import Claim, Renewal
from starlette_jobs._errors import UniqueKeyTakenError
from starlette_jobs._records import EventKind, NewJobs
from starlette_jobs.postgres._store import PostgresStore
from starlette_jobs.worker._running import RunningAttempts
from tests.records import new_jobs, outcome

T = TypeVar("T")

QUEUES = ("default", "emails")
WORKERS = ("worker-a", "worker-b", "worker-c")
UNIQUE_KEYS = ("key-1", "key-2")
CONCURRENCY = 2  # per queue and worker: small, so that claims often find no free slot
# Leases never run out by themselves during a run: expiry is what the `expire` rule forces.
LEASE_SECONDS = 600.0
LATER = 3600.0  # the delay of a delayed job: not due during a run
TERMINAL = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED})
LIVE = frozenset({JobStatus.PENDING, JobStatus.RUNNING})
# How an attempt ends: "failed" retries while attempts are left; "gave up" is a non-retryable
# error, failed at once.
ENDS = ("succeeded", "failed", "gave up")

ROWS = """
SELECT id, queue, status, attempts, max_attempts, lease_token, lease_expires_at,
       lease_expires_at < now() AS expired, worker_id, unique_key, run_at, finished_at,
       jsonb_array_length(errors) AS errors, cancel_requested_at IS NOT NULL AS cancel_requested
  FROM starlette_jobs
 ORDER BY id
"""
EXPIRE = """
UPDATE starlette_jobs SET lease_expires_at = now() - interval '1 second'
 WHERE id = $1 AND status = 'running'
RETURNING lease_expires_at
"""


@dataclass
class Expected:
    """What one row should hold."""

    queue: str
    priority: int
    max_attempts: int
    unique_key: str | None
    run_at_call: int  # the call whose statement last set run_at (to its now())
    delayed: bool  # run_at is an hour after that now(): not due during the run
    status: JobStatus = JobStatus.PENDING
    attempts: int = 0
    lease_token: UUID | None = None
    worker_id: str | None = None
    expired: bool = False  # lease forced into the past, not renewed or rescued since
    errors: int = 0
    cancel_requested: bool = False  # asked to stop while running: it ends cancelled
    # (kind, status, attempts) of every event the job's history must hold, in order.
    events: list[tuple[EventKind, JobStatus, int]] | None = None

    def happened(self, kind: EventKind) -> None:
        """The row just changed: its event, with the state the change left it in."""
        if self.events is None:
            self.events = []
        self.events.append((kind, self.status, self.attempts))


@dataclass(frozen=True)
class Held:
    """A claim as its worker remembers it; stale once the row's lease token has changed."""

    id: int
    lease_token: UUID
    attempts: int
    max_attempts: int


class Lifecycle(RuleBasedStateMachine):
    dsn: ClassVar[str]  # set by the test, on a subclass

    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        try:
            self.store = self.runner.run(PostgresStore.open(self.dsn, min_size=1, max_size=2))
            self.runner.run(
                self.store.pool.execute(
                    "TRUNCATE starlette_jobs, starlette_jobs_events RESTART IDENTITY"
                )
            )
        except BaseException:
            self.runner.close()
            raise
        self.calls = 0
        self.jobs: dict[int, Expected] = {}
        self.held: dict[str, list[Held]] = {worker: [] for worker in WORKERS}
        # Each worker's own bookkeeping, the worker's real one: what it runs now, by token.
        self.running: dict[str, RunningAttempts[int]] = {
            worker: RunningAttempts(dict.fromkeys(QUEUES, CONCURRENCY)) for worker in WORKERS
        }
        self.claims: dict[UUID, Claim] = {}
        # The copies each worker runs, as the model knows them: its bookkeeping must agree.
        self.copies: dict[str, set[UUID]] = {worker: set() for worker in WORKERS}
        self.attempt_numbers = itertools.count()
        self.tokens: set[UUID] = set()
        self.retried: set[int] = set()  # ids that a retry took out of a terminal state this step
        self.seen: dict[int, JobStatus] = {}  # statuses at the last check
        self.run_at: dict[int, datetime] = {}  # run_at at the last check
        self.lease_expires_at: dict[int, datetime] = {}  # of running jobs, at the last check

    def teardown(self) -> None:
        try:
            self.runner.run(self.store.close())
        finally:
            self.runner.close()

    def call(self, statement: Coroutine[Any, Any, T]) -> T:
        self.calls += 1
        return self.runner.run(statement)

    # Helpers that read the model.

    def current(self, held: Held) -> bool:
        return self.jobs[held.id].lease_token == held.lease_token

    def some(self, *statuses: JobStatus) -> bool:
        return any(job.status in statuses for job in self.jobs.values())

    def due(self, queue: str | None = None) -> list[int]:
        """Pending jobs a claim may take, in the claim's order."""
        due = [
            i
            for i, job in self.jobs.items()
            if job.status is JobStatus.PENDING and not job.delayed and queue in (None, job.queue)
        ]
        return sorted(due, key=lambda i: (-self.jobs[i].priority, self.run_at[i], i))

    def holding(self) -> list[str]:
        return [worker for worker in WORKERS if self.held[worker]]

    def draw_held(self, data: st.DataObject, worker: str) -> list[Held]:
        """Some of the worker's claims: those it still holds, and its latest stale ones."""
        mine = self.held[worker]
        pool = [h for h in mine if self.current(h)] + [h for h in mine if not self.current(h)][-3:]
        return data.draw(
            st.lists(st.sampled_from(pool), min_size=1, max_size=4, unique=True), label="claims"
        )

    def draw_job(self, data: st.DataObject, *fitting: JobStatus) -> int:
        """Often a job in one of the `fitting` statuses, else any job (the call must refuse it)."""
        ids = sorted(self.jobs)
        fit = [i for i in ids if self.jobs[i].status in fitting]
        if fit:
            ids = data.draw(st.sampled_from((fit, ids)), label="fitting or any")
        return data.draw(st.sampled_from(ids), label="job")

    def key_holder(self, key: str | None) -> list[int]:
        return [i for i, job in self.jobs.items() if job.unique_key == key and job.status in LIVE]

    def give_back(self, job_id: int) -> None:
        """A release: pending again, the attempt given back, due now; cancelled instead if the
        job was asked to stop."""
        job = self.jobs[job_id]
        job.attempts = max(job.attempts - 1, 0)
        job.lease_token, job.expired = None, False
        job.run_at_call, job.delayed = self.calls, False
        if job.cancel_requested:
            job.status = JobStatus.CANCELLED
            job.happened(EventKind.CANCELLED)
        else:
            job.status = JobStatus.PENDING
            job.happened(EventKind.RELEASED)

    # Producers.

    def insert(self, new: NewJobs, delayed: bool) -> list[int]:
        ids = self.call(self.store.insert_jobs(new))
        for job_id in ids:
            assert job_id not in self.jobs
            assert job_id > max(self.jobs, default=0)  # identity order: the claim's tie-break
            self.jobs[job_id] = Expected(
                new.queue, new.priority, new.max_attempts, new.unique_key, self.calls, delayed
            )
            self.jobs[job_id].happened(EventKind.ENQUEUED)
        return ids

    @initialize(max_attempts=st.lists(st.integers(1, 3), min_size=2, max_size=6))
    def some_jobs(self, max_attempts: list[int]) -> None:
        """Every run starts with work in each queue, so that claims have something to take."""
        for n, attempts in enumerate(max_attempts):
            queue = QUEUES[n % len(QUEUES)]
            new = new_jobs(queue=queue, max_attempts=attempts)
            self.insert(new, delayed=False)

    @rule(
        queue=st.sampled_from(QUEUES),
        count=st.integers(1, 3),
        priority=st.sampled_from((0, 1)),
        max_attempts=st.integers(1, 3),
        delayed=st.sampled_from((False, False, False, True)),
    )
    def enqueue(
        self, queue: str, count: int, priority: int, max_attempts: int, delayed: bool
    ) -> None:
        new = new_jobs(
            count,
            queue=queue,
            max_attempts=max_attempts,
            priority=priority,
            delay=LATER if delayed else None,
        )
        assert len(self.insert(new, delayed)) == count

    @rule(
        queue=st.sampled_from(QUEUES),
        max_attempts=st.integers(1, 3),
        key=st.sampled_from(UNIQUE_KEYS),
    )
    def enqueue_unique(self, queue: str, max_attempts: int, key: str) -> None:
        holder = self.key_holder(key)
        new = new_jobs(queue=queue, max_attempts=max_attempts, unique_key=key)
        if holder:
            # The live job keeps the key; its id comes back and nothing is written.
            assert self.call(self.store.insert_jobs(new)) == holder
        else:
            assert len(self.insert(new, delayed=False)) == 1

    # Workers.

    @precondition(lambda self: self.due())
    @rule(data=st.data())
    def claim(self, data: st.DataObject) -> None:
        worker = data.draw(st.sampled_from(WORKERS), label="worker")
        queue = data.draw(st.sampled_from(QUEUES), label="queue")
        # A worker claims at most its free slots: a stale copy of a released or rescued job,
        # still running, holds one.
        limit = min(data.draw(st.integers(1, 3), label="limit"), self.running[worker].free(queue))
        if limit == 0:
            return
        claims = self.call(self.store.claim_batch(queue, limit, worker, LEASE_SECONDS))
        assert sorted(c.id for c in claims) == sorted(self.due(queue)[:limit])
        assert {c.queue for c in claims} <= {queue}
        self.took(worker, claims)

    def took(self, worker: str, claims: list[Claim]) -> None:
        """The model's and the worker's bookkeeping of a claim."""
        for c in claims:
            job = self.jobs[c.id]
            assert (c.attempts, c.max_attempts) == (
                job.attempts + 1,
                job.max_attempts,
            )
            assert c.lease_token not in self.tokens
            self.tokens.add(c.lease_token)
            job.status, job.attempts, job.worker_id = JobStatus.RUNNING, c.attempts, worker
            job.lease_token, job.expired = c.lease_token, False
            job.happened(EventKind.CLAIMED)
            self.held[worker].append(Held(c.id, c.lease_token, c.attempts, c.max_attempts))
            self.running[worker].start(c, next(self.attempt_numbers))
            self.claims[c.lease_token] = c
            self.copies[worker].add(c.lease_token)

    def attempt_ends(self, worker: str, token: UUID) -> None:
        """The worker's copy with this token ends (if it still runs): finished, or cancelled."""
        if token in self.copies[worker]:
            self.copies[worker].remove(token)
            self.running[worker].end(self.claims[token])

    @precondition(lambda self: self.holding())
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        worker = data.draw(st.sampled_from(self.holding()), label="worker")
        held = self.draw_held(data, worker)
        still = [h for h in held if self.current(h)]
        extended = self.call(
            self.store.extend_leases([(h.id, h.lease_token) for h in held], LEASE_SECONDS)
        )
        # Nothing else holds a row lock here: every lease still held is renewed, and says
        # whether its job was asked to stop.
        assert extended == {
            h.lease_token: Renewal(renewed=True, cancel_requested=self.jobs[h.id].cancel_requested)
            for h in still
        }
        for h in still:
            self.jobs[h.id].expired = False
        for h in held:
            if h.lease_token not in extended:
                self.attempt_ends(worker, h.lease_token)  # lost its lease: the worker cancels it

    @precondition(lambda self: self.holding())
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        """Outcomes, as the worker decides them from its claim; only the held ones are written."""
        worker = data.draw(st.sampled_from(self.holding()), label="worker")
        outcomes = []
        for h in self.draw_held(data, worker):
            end = data.draw(st.sampled_from(ENDS), label="end")
            if end == "succeeded":
                ending = outcome(h, JobStatus.SUCCEEDED, result='"ok"')
            elif end == "failed" and h.attempts < h.max_attempts:
                ending = outcome(h, JobStatus.PENDING, delay=0.0, error="boom")
            else:
                ending = outcome(h, JobStatus.FAILED, error="boom")
            outcomes.append(ending)
            self.attempt_ends(worker, h.lease_token)
        held = [o for o in outcomes if self.jobs[o.id].lease_token == o.lease_token]
        assert self.call(self.store.record_outcomes(outcomes)) == {o.id for o in held}
        for o in held:
            job = self.jobs[o.id]
            job.status, job.lease_token, job.expired = o.status, None, False
            if o.error is not None:
                job.errors += 1
            if o.status is JobStatus.PENDING and job.cancel_requested:
                job.status = JobStatus.CANCELLED  # asked to stop: not retried
            if job.status is JobStatus.PENDING:
                job.run_at_call = self.calls
                job.happened(EventKind.ATTEMPT_FAILED)
            else:
                job.happened(EventKind(job.status.value))

    @precondition(lambda self: self.holding())
    @rule(data=st.data())
    def release_held(self, data: st.DataObject) -> None:
        """A worker shutting down gives its jobs back, with the tokens it claimed them with."""
        worker = data.draw(st.sampled_from(self.holding()), label="worker")
        held = self.draw_held(data, worker)
        still = {h.id for h in held if self.current(h)}
        assert self.call(self.store.release_jobs([(h.id, h.lease_token) for h in held])) == still
        for job_id in still:
            self.give_back(job_id)
        for h in held:
            self.attempt_ends(worker, h.lease_token)

    @precondition(lambda self: any(self.running[worker].count() for worker in WORKERS))
    @rule(data=st.data())
    def clean_shutdown(self, data: st.DataObject) -> None:
        """A worker stops: it releases every attempt its bookkeeping holds, and no job is left
        running under its name, whatever came back to it meanwhile."""
        worker = data.draw(
            st.sampled_from([w for w in WORKERS if self.running[w].count()]), label="worker"
        )
        held = self.running[worker].held()
        still = {job_id for job_id, token in held if self.jobs[job_id].lease_token == token}
        assert self.call(self.store.release_jobs(held)) == still
        for job_id in still:
            self.give_back(job_id)
        for _, token in held:
            self.attempt_ends(worker, token)
        assert not [
            job_id
            for job_id, job in self.jobs.items()
            if job.status is JobStatus.RUNNING and job.worker_id == worker
        ]

    # An operator.

    @precondition(lambda self: self.some(JobStatus.RUNNING))
    @rule(data=st.data())
    def operator_release(self, data: st.DataObject) -> None:
        """Running jobs handed back whoever holds them: one by id, or all of a (dead) worker's."""
        if data.draw(st.booleans(), label="all of a worker's"):
            worker = data.draw(st.sampled_from(WORKERS), label="worker")
            running = sorted(
                i
                for i, job in self.jobs.items()
                if job.status is JobStatus.RUNNING and job.worker_id == worker
            )
            assert self.call(self.store.release_worker_jobs(worker)) == running
        else:
            job_id = self.draw_job(data, JobStatus.RUNNING)
            running = [job_id] if self.jobs[job_id].status is JobStatus.RUNNING else []
            assert self.call(self.store.release_job(job_id)) == bool(running)
        for job_id in running:
            self.give_back(job_id)

    @precondition(lambda self: self.some(JobStatus.PENDING, JobStatus.RUNNING))
    @rule(data=st.data())
    def operator_cancel(self, data: st.DataObject) -> None:
        """A pending job is cancelled; a running one is asked to stop (once): its worker is told,
        and wherever its attempt ends (an outcome, a release, a rescue) it ends cancelled."""
        job_id = self.draw_job(data, JobStatus.PENDING, JobStatus.RUNNING)
        job = self.jobs[job_id]
        answer = self.call(self.store.cancel_job(job_id))
        if job.status is JobStatus.PENDING:
            assert answer is JobStatus.CANCELLED
            job.status = JobStatus.CANCELLED
            job.happened(EventKind.CANCELLED)
        elif job.status is JobStatus.RUNNING and not job.cancel_requested:
            assert answer is JobStatus.RUNNING
            job.cancel_requested = True
            job.happened(EventKind.CANCEL_REQUESTED)
        else:
            assert answer is None

    @precondition(lambda self: self.some(JobStatus.FAILED, JobStatus.CANCELLED))
    @rule(data=st.data())
    def operator_retry(self, data: st.DataObject) -> None:
        job_id = self.draw_job(data, JobStatus.FAILED, JobStatus.CANCELLED)
        job = self.jobs[job_id]
        if job.status not in (JobStatus.FAILED, JobStatus.CANCELLED):
            assert self.call(self.store.retry_job(job_id)) is False
        elif job.unique_key is not None and self.key_holder(job.unique_key):
            with pytest.raises(UniqueKeyTakenError):
                self.call(self.store.retry_job(job_id))
        else:
            assert self.call(self.store.retry_job(job_id)) is True
            job.status, job.attempts, job.cancel_requested = JobStatus.PENDING, 0, False
            job.run_at_call, job.delayed = self.calls, False
            job.happened(EventKind.RETRIED)
            self.retried.add(job_id)

    def running_with_a_free_slot(self) -> list[int]:
        """Running jobs whose worker has a slot free in the job's queue."""
        return [
            i
            for i, job in self.jobs.items()
            if job.status is JobStatus.RUNNING
            and job.worker_id is not None
            and self.running[job.worker_id].free(job.queue) > 0
        ]

    @precondition(lambda self: self.running_with_a_free_slot())
    @rule(data=st.data())
    def comes_back_to_its_worker(self, data: st.DataObject) -> None:
        """A job is released (or rescued) while its worker runs it, and that worker, with a slot
        free, claims it again at once: its stale copy still runs beside the new one."""
        job_id = data.draw(st.sampled_from(self.running_with_a_free_slot()), label="job")
        job = self.jobs[job_id]
        worker = job.worker_id
        assert worker is not None
        if data.draw(st.booleans(), label="rescued rather than released"):
            expired_at = self.call(self.store.pool.fetchval(EXPIRE, job_id))
            self.jobs[job_id].expired = True
            self.lease_expires_at[job_id] = expired_at
            self.rescue_expired(limit=1000)
            if job.status is not JobStatus.PENDING:
                return  # no attempt was left: the job failed
        else:
            assert self.call(self.store.release_job(job_id))
            self.give_back(job_id)
        # It claims as many as it has slots free: the job comes back unless others come first.
        # The release (or rescue) just moved the job's run_at: read it for the claim's order.
        rows = self.call(self.store.pool.fetch("SELECT id, run_at FROM starlette_jobs"))
        self.run_at.update({row["id"]: row["run_at"] for row in rows})
        free = self.running[worker].free(job.queue)
        claims = self.call(self.store.claim_batch(job.queue, free, worker, LEASE_SECONDS))
        assert sorted(c.id for c in claims) == sorted(self.due(job.queue)[:free])
        self.took(worker, claims)

    # Time.

    @precondition(lambda self: self.some(JobStatus.RUNNING))
    @rule(data=st.data())
    def expire(self, data: st.DataObject) -> None:
        """Holders stop renewing (they crashed or stalled) until their leases are in the past;
        a worker's rescue pass comes now or in a later step."""
        running = sorted(i for i, j in self.jobs.items() if j.status is JobStatus.RUNNING)
        stalled = data.draw(
            st.lists(st.sampled_from(running), max_size=2, unique=True),
            label="stalled",
        )
        for job_id in stalled:
            expired_at = self.call(self.store.pool.fetchval(EXPIRE, job_id))
            assert expired_at is not None
            self.jobs[job_id].expired = True
            self.lease_expires_at[job_id] = expired_at
        if not stalled or data.draw(st.booleans(), label="rescue now"):
            self.rescue_expired(data.draw(st.integers(1, 3), label="limit"))

    def rescue_expired(self, limit: int) -> None:
        expired = [i for i, j in self.jobs.items() if j.status is JobStatus.RUNNING and j.expired]
        rescued = self.call(self.store.rescue_expired(limit))
        chosen = [job_id for job_id, _, _ in rescued]
        assert set(chosen) <= set(expired)
        assert len(set(chosen)) == len(chosen) == min(limit, len(expired))
        # The longest expired go first.
        left = [self.lease_expires_at[i] for i in expired if i not in chosen]
        if chosen and left:
            assert max(self.lease_expires_at[i] for i in chosen) <= min(left)
        for job_id, queue, status in rescued:
            job = self.jobs[job_id]
            assert queue == job.queue
            if job.cancel_requested:
                assert status is JobStatus.CANCELLED
            elif job.attempts >= job.max_attempts:
                assert status is JobStatus.FAILED
            else:
                assert status is JobStatus.PENDING
            job.status, job.lease_token, job.expired = status, None, False
            job.errors += 1
            job.run_at_call = self.calls
            job.happened(EventKind.CANCELLED if job.cancel_requested else EventKind.RESCUED)

    # After every step.

    @invariant()
    def rows_match_the_model(self) -> None:
        rows = self.call(self.store.pool.fetch(ROWS))
        assert [row["id"] for row in rows] == sorted(self.jobs)
        running_tokens: list[UUID] = []
        live_keys: list[str] = []
        for row in rows:
            job_id, job = row["id"], self.jobs[row["id"]]
            status = JobStatus(row["status"])
            before = self.seen.get(job_id)
            if before in TERMINAL and status != before:
                assert job_id in self.retried, f"job {job_id} left {before} for {status}"
            assert row["attempts"] <= row["max_attempts"]
            assert (status, row["attempts"], row["max_attempts"], row["queue"]) == (
                job.status,
                job.attempts,
                job.max_attempts,
                job.queue,
            ), f"job {job_id}: (status, attempts, max_attempts, queue)"
            assert (row["worker_id"], row["unique_key"], row["errors"]) == (
                job.worker_id,
                job.unique_key,
                job.errors,
            ), f"job {job_id}: (worker_id, unique_key, errors)"
            assert row["cancel_requested"] == job.cancel_requested
            if status is JobStatus.RUNNING:
                holders = [
                    worker
                    for worker in WORKERS
                    if Held(job_id, row["lease_token"], row["attempts"], row["max_attempts"])
                    in self.held[worker]
                ]
                assert holders == [row["worker_id"]]
                # Its worker's own bookkeeping knows the attempt, under this very token.
                assert (job_id, row["lease_token"]) in self.running[holders[0]].held()
                assert row["lease_token"] == job.lease_token
                assert row["expired"] == job.expired
                running_tokens.append(row["lease_token"])
            else:
                assert (row["lease_token"], row["lease_expires_at"]) == (None, None)
            assert (row["finished_at"] is not None) == (status in TERMINAL)
            if status in LIVE and row["unique_key"] is not None:
                live_keys.append(row["unique_key"])
        assert len(set(running_tokens)) == len(running_tokens)
        for worker in WORKERS:
            known = {(self.claims[token].id, token) for token in self.copies[worker]}
            assert set(self.running[worker].held()) == known, f"{worker}'s bookkeeping"
            for queue in QUEUES:
                assert self.running[worker].count(queue) <= CONCURRENCY
        assert len(set(live_keys)) == len(live_keys)

        # The history agrees with the state: every transition the model went through, in
        # order, each with the status and attempts it left; the last one is the row's state.
        # As `jobs.events` tells it: the claims are read from the rows, not written as events.
        recorded = {
            job_id: [
                (e.kind, e.status, e.attempt) for e in self.call(self.store.job_events(job_id))
            ]
            for job_id in self.jobs
        }
        for job_id, job in self.jobs.items():
            assert recorded[job_id] == job.events, f"job {job_id}: events"
            assert recorded[job_id][-1][1:] == (job.status, job.attempts)

        # run_at follows the calls that set it: a later call's now() is not earlier, and one
        # statement gives all its rows the same now().
        order = sorted(
            rows, key=lambda r: (self.jobs[r["id"]].delayed, self.jobs[r["id"]].run_at_call)
        )
        for earlier, later in itertools.pairwise(order):
            a, b = self.jobs[earlier["id"]], self.jobs[later["id"]]
            if (a.delayed, a.run_at_call) == (b.delayed, b.run_at_call):
                assert earlier["run_at"] == later["run_at"]
            else:
                assert earlier["run_at"] <= later["run_at"]

        self.seen = {row["id"]: JobStatus(row["status"]) for row in rows}
        self.run_at = {row["id"]: row["run_at"] for row in rows}
        self.lease_expires_at = {
            row["id"]: row["lease_expires_at"] for row in rows if row["lease_expires_at"]
        }
        self.retried.clear()


async def commit_without_flushing(dsn: str) -> None:
    """Each step commits: not waiting for the disk makes a run (and shrinking) twice as fast."""
    connection = await asyncpg.connect(dsn)
    try:
        name = await connection.fetchval("SELECT current_database()")
        await connection.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    finally:
        await connection.close()


# Room for Hypothesis to shrink a failure to a short sequence (it stops shrinking after 5
# minutes); cut short by the default timeout, a failure would be reported as a flaky test.
@pytest.mark.timeout(420)
def test_no_sequence_of_operations_breaks_the_lifecycle_invariants(database_dsn: str) -> None:
    asyncio.run(commit_without_flushing(database_dsn))

    class OnTheTestDatabase(Lifecycle):
        dsn = database_dsn

    # Some hypothesis releases ship this function unannotated: typed here, for mypy --strict.
    run_as_test: Callable[..., None] = run_state_machine_as_test
    run_as_test(
        OnTheTestDatabase,
        settings=settings(
            max_examples=40,
            stateful_step_count=30,
            deadline=None,
            # One failure shrunk to its shortest sequence, rather than every distinct one.
            report_multiple_bugs=False,
        ),
    )
