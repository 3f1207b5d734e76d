"""The yardstick: a hand-written queue on raw asyncpg, the floor cost of "claim with SKIP LOCKED,
acknowledge in batches" in Python. No retries, leases, tracing or validation: what starlette-jobs
is compared with, not a queue to use. The same design as the shared peer benchmark's
`bench_raw_asyncpg.py`, so that ratios taken here and there mean the same thing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import asyncpg

SCHEMA = """
CREATE TABLE IF NOT EXISTS rawq_jobs (
    id          bigserial   PRIMARY KEY,
    queue       text        NOT NULL DEFAULT 'default',
    payload     jsonb       NOT NULL,
    status      text        NOT NULL DEFAULT 'pending',
    run_at      timestamptz NOT NULL DEFAULT now(),
    attempts    int         NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),
    started_at  timestamptz,
    finished_at timestamptz
);
CREATE INDEX IF NOT EXISTS rawq_jobs_pending_idx ON rawq_jobs (queue, run_at, id)
    WHERE status = 'pending';
CREATE OR REPLACE FUNCTION rawq_jobs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('rawq_jobs', '');
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS rawq_jobs_notify_trg ON rawq_jobs;
CREATE TRIGGER rawq_jobs_notify_trg AFTER INSERT ON rawq_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION rawq_jobs_notify();
"""
INSERT_ONE = "INSERT INTO rawq_jobs (queue, payload) VALUES ($1, $2::text::jsonb) RETURNING id"
INSERT_MANY = (
    "INSERT INTO rawq_jobs (queue, payload) "
    "SELECT $1, p::jsonb FROM unnest($2::text[]) AS p RETURNING id"
)
CLAIM = """
WITH c AS (
    SELECT id FROM rawq_jobs
     WHERE queue = $1 AND status = 'pending' AND run_at <= now()
     ORDER BY run_at, id
     LIMIT $2
       FOR UPDATE SKIP LOCKED
)
UPDATE rawq_jobs j
   SET status = 'running', attempts = j.attempts + 1, started_at = now()
  FROM c
 WHERE j.id = c.id
RETURNING j.id, j.payload
"""
ACK = "UPDATE rawq_jobs SET status = 'done', finished_at = now() WHERE id = ANY($1::bigint[])"
COUNT_STARTED = "SELECT count(*) FROM rawq_jobs WHERE status <> 'pending'"
COUNT_DONE = "SELECT count(*) FROM rawq_jobs WHERE status = 'done'"
POLL_INTERVAL = 1.0


async def setup(connection: asyncpg.Connection[Any]) -> None:
    await connection.execute(SCHEMA)


async def enqueue_one(connection: asyncpg.Connection[Any], arguments: dict[str, Any]) -> int:
    job_id: int = await connection.fetchval(INSERT_ONE, "default", json.dumps(arguments))
    return job_id


async def enqueue_many(
    connection: asyncpg.Connection[Any], items: list[dict[str, Any]]
) -> list[int]:
    rows = await connection.fetch(INSERT_MANY, "default", [json.dumps(i) for i in items])
    return [row[0] for row in rows]


async def run_worker(
    dsn: str, concurrency: int, job: Callable[..., Any], stop: asyncio.Event
) -> None:
    """Claims at most the free slots, runs each job in a task, acknowledges in group commits."""
    claim_conn = await asyncpg.connect(dsn)
    ack_conn = await asyncpg.connect(dsn)
    listen_conn = await asyncpg.connect(dsn)
    for conn in (claim_conn, ack_conn):
        await conn.set_type_codec(
            "jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog"
        )
    wake, slot_free, have_done = asyncio.Event(), asyncio.Event(), asyncio.Event()
    done_ids: list[int] = []
    running = 0
    tasks: set[asyncio.Task[None]] = set()

    async def run_job(job_id: int, payload: dict[str, Any]) -> None:
        nonlocal running
        try:
            await job(**payload)
        finally:
            running -= 1
            slot_free.set()
            done_ids.append(job_id)
            have_done.set()

    async def acknowledge() -> None:
        nonlocal done_ids
        while True:
            await have_done.wait()
            have_done.clear()
            ids, done_ids = done_ids, []
            if ids:
                await ack_conn.execute(ACK, ids)

    await listen_conn.add_listener("rawq_jobs", lambda *_: wake.set())
    acker = asyncio.create_task(acknowledge())
    claim = await claim_conn.prepare(CLAIM)
    try:
        while not stop.is_set():
            free = concurrency - running
            if free <= 0:
                slot_free.clear()
                await slot_free.wait()
                continue
            wake.clear()
            rows = await claim.fetch("default", free)
            for row in rows:
                running += 1
                task = asyncio.create_task(run_job(row["id"], row["payload"]))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            if rows:
                await asyncio.sleep(0)
                continue
            waiters = {asyncio.create_task(wake.wait()), asyncio.create_task(stop.wait())}
            await asyncio.wait(waiters, timeout=POLL_INTERVAL, return_when=asyncio.FIRST_COMPLETED)
            for waiter in waiters:
                waiter.cancel()
    finally:
        if tasks:
            await asyncio.wait(tasks, timeout=10)
        await asyncio.sleep(0.1)
        acker.cancel()
        for conn in (claim_conn, ack_conn, listen_conn):
            await conn.close()
