"""Web tier benchmark: does a cheap route stay quick while the in-process worker drains jobs?

    python benchmarks/web_tier.py [--dsn URL] [--rate 200] [--seconds 10] [--hold-ms 2,0.1]
                                  [--await-ms 0]

Set-up:
    - Database: `--dsn`, else `DATABASE_URL`, else the embedded PostgreSQL in a temporary data
      directory. A database of its own is created for the run and dropped at the end.
    - Server: uvicorn in a subprocess on a free port of 127.0.0.1, serving `web_tier:app` (this
      file is that module too; its directory goes on PYTHONPATH): a Starlette app with one cheap
      route, `GET /ping`, and `lifespan=jobs.lifespan`. Its `Jobs` works the queue `web_tier` at
      concurrency 10, or runs no worker (`queues={}`) when a separate process does.
    - Worker process (one scenario): `python -m starlette_jobs worker web_tier:worker_jobs`,
      concurrency 10, as an operator would start it (no event loop protection there).
    - Jobs: `hold(ms)`, an `async def` that holds the event loop for `ms` milliseconds with
      `time.sleep`, as a computation or a blocking call in an `async def` would; with
      `--await-ms`, it then awaits that long, as an HTTP call or a query would.
    - Load: open-loop. `--rate` requests a second for `--seconds`, each sent at its scheduled time
      whatever the earlier ones are doing, through one `httpx2.AsyncClient` (a pool of keep-alive
      connections). A request's latency runs from its scheduled time to the end of its response,
      so a server that falls behind cannot hide it by slowing the client down.
    - Drain rate: the jobs that succeeded while the load ran, over its length. Just before it, a
      backlog is enqueued that the worker cannot finish within it; the table says if it did.

Scenarios, for each `--hold-ms`, each on a server started anew and warmed up with 3 s of the
same load, measured idle (nothing to run) and then while the backlog drains:
    in-process      the in-process worker, protection off (`protect_event_loop=False`)
    protected       the in-process worker, with the default under `jobs.lifespan`: protection on
    separate        the web process runs no worker; a `starlette-jobs worker` process drains

A machine shared with other work shifts every figure: compare the rows of one run, and read the
load averages printed below the table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx2
from _server import on_a_server
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from starlette_jobs import Jobs, Retry, job

HERE = Path(__file__).resolve().parent
QUEUE = "web_tier"
CONCURRENCY = 10
DSN_ENV = "WEB_TIER_DSN"
MODE_ENV = "WEB_TIER_MODE"  # protected, in-process or separate
TARGET_ENV = "WEB_TIER_LOOP_LAG_TARGET"  # seconds; the Jobs' default unless set
WARM_UP_SECONDS = 3.0


# -- the server's side: imported as `web_tier` by uvicorn and by `starlette-jobs worker` ---------


@job(name="benchmarks.web_tier.hold", queue=QUEUE, retry=Retry.none())
async def hold(ms: float, await_ms: float = 0.0) -> None:
    time.sleep(ms / 1000)  # holds the event loop  # noqa: ASYNC251
    if await_ms:
        await asyncio.sleep(await_ms / 1000)  # leaves it free


def web_jobs() -> Jobs:
    mode = os.environ.get(MODE_ENV, "separate")
    settings: dict[str, Any] = {"queues": {} if mode == "separate" else {QUEUE: CONCURRENCY}}
    if mode == "in-process":
        settings["protect_event_loop"] = False
    if os.environ.get(TARGET_ENV):
        settings["loop_lag_target"] = float(os.environ[TARGET_ENV])
    return Jobs(os.environ.get(DSN_ENV), **settings)


async def ping(request: Request) -> PlainTextResponse:
    return PlainTextResponse("pong")


jobs = web_jobs()
worker_jobs = Jobs(os.environ.get(DSN_ENV), queues={QUEUE: CONCURRENCY})
app = Starlette(routes=[Route("/ping", ping)], lifespan=jobs.lifespan)


# -- the harness --------------------------------------------------------------------------------


@dataclass
class Figures:
    p50: float  # ms
    p99: float  # ms
    errors: int
    drain: float | None = None  # jobs/s
    ran_out: bool = False


def with_database(dsn: str, name: str) -> str:
    return urlunsplit(urlsplit(dsn)._replace(path="/" + name))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def child_env(dsn: str, mode: str, target: str | None) -> dict[str, str]:
    env = {**os.environ, DSN_ENV: dsn, MODE_ENV: mode}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    if target:
        env[TARGET_ENV] = target
    return env


def spawn(command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, *command], env=env, cwd=HERE)


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.asynccontextmanager
async def serving(
    dsn: str, mode: str, target: str | None, rate: float
) -> AsyncIterator[httpx2.AsyncClient]:
    """uvicorn (and, for `separate`, a worker process) running; a client for the server."""
    port = free_port()
    env = child_env(dsn, mode, target)
    server = spawn(
        ["-m", "uvicorn", "web_tier:app", "--host", "127.0.0.1", "--port", str(port),
         "--log-level", "warning", "--no-access-log"],
        env,
    )  # fmt: skip
    worker = None
    if mode == "separate":
        quiet = ["--log-level", "warning"]
        worker = spawn(["-m", "starlette_jobs", *quiet, "worker", "web_tier:worker_jobs"], env)
    limits = httpx2.Limits(max_connections=200, max_keepalive_connections=200)
    try:
        async with httpx2.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", limits=limits, timeout=30
        ) as client:
            deadline = time.monotonic() + 60
            while True:
                with contextlib.suppress(httpx2.TransportError):
                    if (await client.get("/ping")).status_code == 200:
                        break
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError(f"uvicorn did not start ({mode})")
                await asyncio.sleep(0.1)
            # Warm: connections open, code paths run, the start's own work done, and (separate)
            # the worker listening. The first seconds of a server are slower, whatever it runs.
            await load(client, rate, WARM_UP_SECONDS)
            yield client
    finally:
        stop(server)
        if worker is not None:
            stop(worker)


async def load(client: httpx2.AsyncClient, rate: float, seconds: float) -> Figures:
    """Open-loop: request i is sent at start + i / rate, whatever the others are doing."""
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    errors = 0

    async def one(at: float) -> None:
        nonlocal errors
        try:
            response = await client.get("/ping")
        except httpx2.HTTPError:
            errors += 1
            return
        if response.status_code != 200:
            errors += 1
        latencies.append((loop.time() - at) * 1000)

    start = loop.time() + 0.01
    requests = []
    for i in range(int(rate * seconds)):
        at = start + i / rate
        if at > loop.time():
            await asyncio.sleep(at - loop.time())
        requests.append(asyncio.create_task(one(at)))
    await asyncio.gather(*requests)
    return Figures(percentile(latencies, 50), percentile(latencies, 99), errors)


async def succeeded(conn: asyncpg.Connection[Any]) -> tuple[int, int]:
    row = await conn.fetchrow(
        "SELECT count(*) FILTER (WHERE status = 'succeeded'), "
        "count(*) FILTER (WHERE status = 'pending') FROM starlette_jobs"
    )
    assert row is not None
    return row[0], row[1]


async def drain_under_load(
    client: httpx2.AsyncClient,
    producer: Jobs,
    conn: asyncpg.Connection[Any],
    args: argparse.Namespace,
    ms: float,
) -> Figures:
    # More than any worker here can run in the window: a loop does at most 1 / hold jobs a
    # second, and the per-job overhead caps it at a few thousand.
    backlog = int(args.seconds * min(6000, 1.5 * 1000 / ms)) + 1000
    for first in range(0, backlog, 20_000):
        count = min(20_000, backlog - first)
        await producer.enqueue_many(hold, [{"ms": ms, "await_ms": args.await_ms}] * count)
    # Statistics for the planner, as autovacuum would soon take them: without them, each claim
    # scans the whole backlog.
    await conn.execute("ANALYZE starlette_jobs")
    await asyncio.sleep(0.5)  # past the first claims: the steady state is what is measured
    before, _ = await succeeded(conn)
    began = time.perf_counter()
    figures = await load(client, args.rate, args.seconds)
    after, pending = await succeeded(conn)
    figures.drain = (after - before) / (time.perf_counter() - began)
    figures.ran_out = pending == 0
    return figures


async def run(args: argparse.Namespace, server_dsn: str) -> None:
    name = f"sjweb_{os.getpid()}"
    admin = await asyncpg.connect(with_database(server_dsn, "postgres"))
    await admin.execute(f'CREATE DATABASE "{name}"')
    dsn = with_database(server_dsn, name)
    rows: list[tuple[str, str, Figures, Figures]] = []
    try:
        async with Jobs(dsn, queues={}) as producer:  # applies the migrations, too
            conn = await asyncpg.connect(dsn)
            try:
                for ms in args.hold_ms:
                    label = f"{ms:g} ms" + (
                        f", then awaits {args.await_ms:g} ms" * bool(args.await_ms)
                    )
                    for mode in ("in-process", "protected", "separate"):
                        await conn.execute("TRUNCATE starlette_jobs")
                        async with serving(dsn, mode, args.loop_lag_target, args.rate) as client:
                            idle = await load(client, args.rate, args.seconds)
                            figures = await drain_under_load(client, producer, conn, args, ms)
                            rows.append((label, mode, idle, figures))
                        print(f"{label} {mode}: done", file=sys.stderr)
            finally:
                await conn.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    print_table(rows, args)


def print_table(rows: list[tuple[str, str, Figures, Figures]], args: argparse.Namespace) -> None:
    print()
    print(
        "| jobs hold the loop | worker | idle p50 / p99 (ms) | draining p50 / p99 (ms) "
        "| p99 ÷ idle p99 | drain (jobs/s) | drain ÷ separate | errors |"
    )
    print("|---|---|---|---|---|---|---|---|")
    separate = {label: f.drain for label, mode, _, f in rows if mode == "separate"}
    for label, mode, idle, f in rows:
        assert f.drain is not None
        drain = f"{f.drain:,.0f}" + (" (ran out)" * f.ran_out)
        share = f"{f.drain / separate[label]:.2f}" if separate.get(label) else "-"
        print(
            f"| {label} | {mode} | {idle.p50:.1f} / {idle.p99:.1f} | {f.p50:.1f} / {f.p99:.1f} "
            f"| {f.p99 / idle.p99:.2f} | {drain} | {share} | {idle.errors + f.errors} |"
        )
    print(
        f"\nsettings: rate={args.rate:g}/s seconds={args.seconds:g} concurrency={CONCURRENCY} "
        f"loop_lag_target={args.loop_lag_target or 'default'}; cpus={os.cpu_count()}; "
        f"load average before/after: {LOAD_BEFORE} / {os.getloadavg()}"
    )


LOAD_BEFORE = os.getloadavg()


async def with_server(args: argparse.Namespace) -> None:
    await on_a_server(args.dsn, lambda dsn: run(args, dsn))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--rate", type=float, default=200.0, help="requests a second")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each load")
    parser.add_argument(
        "--hold-ms",
        type=lambda text: [float(ms) for ms in text.split(",")],
        default=[2.0, 0.1],
        help="how long each job holds the loop, in ms (comma-separated)",
    )
    parser.add_argument(
        "--await-ms", type=float, default=0.0, help="how long each job then awaits, in ms"
    )
    parser.add_argument(
        "--loop-lag-target", help="the protected server's loop_lag_target, in seconds"
    )
    args = parser.parse_args()
    asyncio.run(with_server(args))


if __name__ == "__main__":
    main()
