"""The fixture the tests of `starlette_jobs.web` share: a client of `reports.starlette_app`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from tests.web.reports import starlette_app


@pytest.fixture
def client(database_dsn: str) -> Iterator[TestClient]:
    with TestClient(starlette_app(database_dsn)) as client:
        yield client
