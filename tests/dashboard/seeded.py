"""What the dashboard's tests look at: a database with jobs in each state a page shows, the
worker that ran them still live, and a schedule; and the dashboard mounted under `/ops` of an
app, as a user mounts it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount

from starlette_jobs import Jobs, Retry, job, periodic
from starlette_jobs.dashboard import Dashboard

MOUNT = "/ops"


@job(queue="dash-mail")
async def send_email(to: str) -> dict[str, str]:
    return {"sent_to": to}


@job(queue="dash-mail", retry=Retry.none())
async def broken_report(month: str) -> None:
    raise RuntimeError(f"no sales figures for {month}")


@job(queue="dash-reports")
async def build_report(month: str) -> None:
    """Enqueued on a queue no worker of the tests works: it stays pending and due."""


@dataclass(frozen=True, slots=True)
class Seeded:
    jobs: Jobs
    sent: list[int]
    """Three `send_email` jobs that succeeded, oldest first."""
    failed: int
    """A `broken_report` that failed, its only attempt used."""
    delayed: int
    """A `send_email` pending, due in an hour."""
    report: int
    """A `build_report` pending and due, on a queue no live worker works."""


def declare_schedule() -> None:
    """A schedule, which the worker of `seed` declares (the test's registry forgets it)."""
    periodic("0 0 1 1 *", name="tests.dashboard.new_year", arguments={"to": "all@example.com"})(
        send_email
    )


async def seed(jobs: Jobs) -> Seeded:
    """Jobs in each state, through `jobs`, whose worker works `dash-mail`."""
    sent = [await send_email.enqueue(to=f"user{n}@example.com") for n in range(3)]
    failed = await broken_report.enqueue(month="2026-10")
    await jobs.drain()
    delayed = await send_email.configure(delay=3600).enqueue(to="later@example.com")
    report = await build_report.enqueue(month="2026-11")
    return Seeded(jobs=jobs, sent=sent, failed=failed, delayed=delayed, report=report)


def app_of(dashboard: Dashboard) -> Starlette:
    """A user's app with the dashboard mounted (its `Jobs` is started by the test)."""
    return Starlette(routes=[Mount(MOUNT, app=dashboard)])


Calls = list[tuple[str, str]]


def allow_but_cancel(calls: Calls) -> Callable[[Request, str, str], bool | str]:
    """An `authorize` hook: Ada may do anything but cancel; each call is recorded."""

    def authorize(request: Request, action: str, queue: str) -> bool | str:
        calls.append((action, queue))
        return False if action == "cancel" else "ada@example.com"

    return authorize
