"""The worker module the process tests start with `python -m starlette_jobs worker`.

Every job appends "<event> <n> <pid> <attempt>" lines to the file named by $RUN_LOG, so a test
can tell which process ran what, how often, and whether it got to the end.
"""

from __future__ import annotations

import asyncio
import os
import time

from starlette_jobs import Jobs, Queue, Retry, current_job, job

jobs = Jobs(queues={"default": 10}, poll_interval=0.2)
# The Jobs of processes/test_limits.py's workers (`LIMITED_APP`): one queue with a global limit.
limited_jobs = Jobs(queues={"limited": Queue(concurrency=10, global_limit=4)}, poll_interval=0.2)
# And of those with a limit per customer (`KEYED_APP`).
keyed_jobs = Jobs(
    queues={"keyed": Queue(concurrency=10, key="customer", key_limit=1)}, poll_interval=0.2
)


def append_to_run_log(line: str) -> None:
    # One short write per line with O_APPEND: lines from several processes never interleave.
    fd = os.open(os.environ["RUN_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


RECORD_BYTES = 64
"""Each record of `log` is this long, padded: a divisor of the page size, so that none straddles
two pages. A write across a page boundary can be torn by the SIGKILL of its process (the
kernel writes the first page, then sees the signal), which glued half a record to the next
line another process wrote (seen once in CI)."""


def log(event: str, n: int) -> None:
    me = current_job()
    attempt = me.attempt if me is not None else 0
    record = f"{event} {n} {os.getpid()} {attempt} {time.time():.6f}"
    append_to_run_log(record.ljust(RECORD_BYTES - 1) + "\n")


@job(retry=Retry.fixed(max_attempts=3, delay=0.1))
async def work(n: int, seconds: float = 0.0) -> int:
    log("start", n)
    await asyncio.sleep(seconds)
    log("done", n)
    return os.getpid()


@job(queue="other", retry=Retry.fixed(max_attempts=3, delay=0.1))
async def other_work(n: int, seconds: float = 0.0) -> int:
    log("start", n)
    await asyncio.sleep(seconds)
    log("done", n)
    return os.getpid()


@job(queue="limited", retry=Retry.fixed(max_attempts=3, delay=0.1))
async def limited_work(n: int, seconds: float = 0.0) -> int:
    log("start", n)
    await asyncio.sleep(seconds)
    log("done", n)
    return os.getpid()


@job(queue="keyed", retry=Retry.fixed(max_attempts=3, delay=0.1))
async def keyed_work(n: int, customer: str, seconds: float = 0.0) -> int:
    log("start", n)
    await asyncio.sleep(seconds)
    log("done", n)
    return os.getpid()


@job(timeout=0.5, retry=Retry.fixed(max_attempts=2, delay=0.1))
async def hang(n: int) -> None:
    log("start", n)
    await asyncio.sleep(3600)


@job(retry=Retry.none())
async def stubborn(n: int) -> None:
    """Ignores every cancellation: the worst a job can do to shutdown."""
    log("start", n)
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            log("ignored-cancel", n)


class Custom(BaseException):
    pass


@job(retry=Retry.none())
async def poison(n: int, kind: str) -> None:
    log("start", n)
    if kind == "system-exit":
        raise SystemExit(3)
    if kind == "keyboard-interrupt":
        raise KeyboardInterrupt
    if kind == "base-exception":
        raise Custom("not an Exception")
    if kind == "generator-exit":
        raise GeneratorExit
    if kind == "self-cancel":
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(1)
    if kind == "inner-cancel":
        inner = asyncio.create_task(asyncio.sleep(10))
        inner.cancel()
        await inner
    raise AssertionError(f"unknown kind {kind}")


@job(retry=Retry.none())
def poison_in_thread(n: int) -> None:
    raise SystemExit(4)


@job(retry=Retry.fixed(max_attempts=3, delay=0.1))
async def long_sleep(n: int, seconds: float = 60.0) -> dict[str, float]:
    """Sleeps; cancelled, returns how long it slept (its partial statistics) and who ran it."""
    log("start", n)
    began = time.monotonic()
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        log("cancelled", n)
        return {"slept": time.monotonic() - began, "pid": os.getpid()}
    log("done", n)
    return {"slept": time.monotonic() - began, "pid": os.getpid()}


@job(retry=Retry.fixed(max_attempts=3, delay=0.1))
async def gated(n: int, gate: str) -> int:
    """Runs until the file `gate` exists (the test opens it: the job's end is the test's to
    choose, whatever process runs it); stopped first, logs "cancelled"."""
    log("start", n)
    try:
        while not os.path.exists(gate):  # noqa: ASYNC110, ASYNC240 - a tiny local check, no event
            await asyncio.sleep(0.02)
    except asyncio.CancelledError:
        log("cancelled", n)
        raise
    log("done", n)
    return os.getpid()
