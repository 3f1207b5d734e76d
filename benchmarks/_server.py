"""Where a benchmark's PostgreSQL runs: the server at the given DSN, else an embedded one in a
temporary data directory, dropped at the end."""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable

from starlette_jobs import Jobs


async def on_a_server(dsn: str | None, run: Callable[[str], Awaitable[None]]) -> None:
    """Awaits `run(dsn)`: with `dsn` if given, else with an embedded server's."""
    if dsn:
        await run(dsn)
        return
    with tempfile.TemporaryDirectory() as data_dir:
        embedded = Jobs(queues={}, embedded_data_dir=data_dir)
        async with embedded:
            assert embedded.dsn is not None
            await run(embedded.dsn)
