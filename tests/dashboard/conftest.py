"""The fixtures the dashboard's tests share: a seeded database, and a client of the app that
mounts the dashboard."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest

from starlette_jobs import Jobs
from starlette_jobs.dashboard import Dashboard
from tests.dashboard.seeded import Seeded, app_of, declare_schedule, seed


@pytest.fixture
async def seeded(database_dsn: str) -> AsyncIterator[Seeded]:
    declare_schedule()
    async with Jobs(database_dsn, queues={"dash-mail": 2}) as jobs:
        yield await seed(jobs)


@pytest.fixture
async def client(seeded: Seeded) -> AsyncIterator[httpx2.AsyncClient]:
    transport = httpx2.ASGITransport(app=app_of(Dashboard(seeded.jobs)))
    async with httpx2.AsyncClient(transport=transport, base_url="http://test") as client:
        yield client
