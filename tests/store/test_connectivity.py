"""Timeouts and backoff (`_connectivity`): how long a worker's statements may take, what the
server is told, and how retries space out. How driver errors are classified is in
postgres/test_driver_errors.py."""

from __future__ import annotations

import asyncio
import types

import pytest

from starlette_jobs.store import _connectivity as _connectivity
from starlette_jobs.store._connectivity import (
    CONNECT_TIMEOUT,
    STATEMENT_TIMEOUT,
    Backoff,
    session_settings,
    worker_statement_timeout,
)


@pytest.mark.parametrize(
    ("lease", "timeout"),
    [(30.0, 10.0), (300.0, STATEMENT_TIMEOUT), (9.0, 3.0), (1.5, 1.0), (0.01, 1.0)],
)
def test_a_workers_statements_wait_a_third_of_the_lease_within_bounds(
    lease: float, timeout: float
) -> None:
    assert worker_statement_timeout(lease) == pytest.approx(timeout)


def test_connections_and_statements_give_up_within_seconds() -> None:
    assert 0 < CONNECT_TIMEOUT <= 30
    assert 0 < STATEMENT_TIMEOUT <= 30


def test_the_server_gives_a_statement_up_before_the_client_does() -> None:
    settings = session_settings(10.0, "claims")
    assert settings == {
        "statement_timeout": "8000",
        "idle_in_transaction_session_timeout": "8000",  # a process stopped mid-transaction
        "TimeZone": "UTC",
        "application_name": "starlette_jobs claims",
    }
    assert int(session_settings(1.0, "x")["statement_timeout"]) < 1000


def test_the_server_timeout_is_never_zero_which_would_mean_none() -> None:
    assert session_settings(0.0001, "leases")["statement_timeout"] == "1"


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The delays `Backoff.wait()` asks for, with the jitter at its top (the full delay), and
    without waiting for them."""
    delays: list[float] = []

    async def sleep(delay: float) -> None:
        delays.append(delay)

    monkeypatch.setattr(_connectivity, "asyncio", types.SimpleNamespace(sleep=sleep))
    monkeypatch.setattr("starlette_jobs.store._connectivity.random.random", lambda: 1.0)
    return delays


async def test_backoff_doubles_up_to_its_cap_and_starts_over_when_reset(
    slept: list[float],
) -> None:
    backoff = Backoff()
    for _ in range(8):
        await backoff.wait()
    backoff.reset()
    await backoff.wait()
    assert slept == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 0.1])


async def test_backoff_jitter_waits_between_half_and_all_of_the_delay(
    monkeypatch: pytest.MonkeyPatch, slept: list[float]
) -> None:
    monkeypatch.setattr("starlette_jobs.store._connectivity.random.random", lambda: 0.0)
    backoff = Backoff(first=2.0, cap=3.0)
    await backoff.wait()
    await backoff.wait()
    assert slept == pytest.approx([1.0, 1.5])


async def test_a_set_interrupt_ends_the_wait_at_once() -> None:
    interrupt = asyncio.Event()
    interrupt.set()
    async with asyncio.timeout(5):  # the delay itself would be a minute
        await Backoff(first=60.0, cap=60.0).wait(interrupt)


async def test_an_interrupt_set_during_the_wait_ends_it() -> None:
    interrupt = asyncio.Event()
    waiting = asyncio.create_task(Backoff(first=60.0, cap=60.0).wait(interrupt))
    await asyncio.sleep(0)  # the wait has begun
    assert not waiting.done()
    interrupt.set()
    async with asyncio.timeout(5):
        await waiting


async def test_without_an_interrupt_the_wait_runs_its_delay_out() -> None:
    interrupt = asyncio.Event()
    async with asyncio.timeout(5):
        await Backoff(first=0.01, cap=0.01).wait(interrupt)
    assert not interrupt.is_set()
