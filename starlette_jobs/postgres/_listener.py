"""The LISTEN connection (`Listener`, what `store/_listener.Listener` is on PostgreSQL), and the
names of the channels it listens on."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping

from ._connections import Connection, answered_within, connect
from ._driver_errors import raise_as_store_error
from ._schema import DEFAULT_CHANNEL_PREFIX


def channel_for(queue: str, prefix: str = DEFAULT_CHANNEL_PREFIX) -> str:
    """The LISTEN/NOTIFY channel of a queue (the same text the SQL builds with `||`); `prefix`:
    the schema's (`_schema.channel_prefix`)."""
    return f"{prefix}:{queue}"


# The channels of sql/queries.sql that are not a queue's (a queue's name has no ':' in front),
# after the schema's prefix (`_schema.channel_prefix`).
CANCEL_CHANNEL = ".cancel"
"""Payload: the lease token of a running attempt asked to stop."""
OUTCOMES_CHANNEL = ".outcomes"
"""Payload: the id of a finished job that someone waits for."""
CONTROLS_CHANNEL = ".controls"
"""Payload: the name of a queue whose controls (paused, limits) changed."""


class Listener:
    """The LISTEN connection: calls a channel's callback with each notification's payload."""

    def __init__(self, connection: Connection, statement_timeout: float) -> None:
        self._connection = connection
        self._statement_timeout = statement_timeout

    @classmethod
    async def open(
        cls,
        dsn: str,
        statement_timeout: float,
        channels: Mapping[str, Callable[[str], None]],
        settings: dict[str, str] | None = None,
    ) -> Listener:
        connection = await connect(dsn, statement_timeout, "listen", settings)
        try:
            for channel, on_payload in channels.items():
                await connection.add_listener(channel, lambda *args, call=on_payload: call(args[3]))
        except BaseException as error:
            connection.terminate()
            raise_as_store_error(error)
        return cls(connection, statement_timeout)

    async def alive(self, timeout: float) -> bool:
        """Whether the server still answers on this connection within `timeout` seconds. An
        idle connection whose network went silent would otherwise look open, and notifications
        would never come."""
        if self._connection.is_closed():
            return False
        try:
            await answered_within(self._connection, self._connection.execute("SELECT 1"), timeout)
        except Exception:
            return False
        return True

    async def close(self) -> None:
        if self._connection.is_closed():
            return
        try:
            await self._connection.close(timeout=self._statement_timeout)
        except Exception:  # the server already dropped it, or the network is gone
            self._connection.terminate()

    def terminate(self) -> None:
        with contextlib.suppress(Exception):
            self._connection.terminate()
