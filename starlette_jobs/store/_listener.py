"""`Listener`: what a store hands back for a connection held open, a subscription to queues'
wake-ups (LISTEN/NOTIFY on PostgreSQL) or a worker's liveness lock."""

from __future__ import annotations

from typing import Protocol


class Listener(Protocol):
    """A subscription to queues' wake-ups (LISTEN/NOTIFY on PostgreSQL)."""

    async def alive(self, timeout: float) -> bool:
        """Whether wake-ups still arrive (a connection may have gone silent)."""
        ...

    async def close(self) -> None: ...

    def terminate(self) -> None: ...
