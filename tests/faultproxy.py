"""A TCP proxy between the library and PostgreSQL that can add latency, drop traffic silently
(a blackhole), heal, and reset connections: the network faults a real deployment meets, which a
stopped server cannot imitate (a stopped server closes its sockets; a dead route says nothing).

    async def test_x(fault_proxy: FaultProxy) -> None:
        async with Jobs(fault_proxy.dsn) as jobs:
            ...
            fault_proxy.blackhole()                                # everything, new ones too
            fault_proxy.blackhole(where=opened_before(moment))     # only these, new ones flow
            fault_proxy.reset(where=ran("LISTEN"))                 # RST on both sides
            fault_proxy.heal()

Each connection is known by its order of opening (`index`), the parameters of its startup
message (`application_name`, `user`, `database`, any `server_settings`), the moment it opened,
and the SQL its client sent (`statements`), so a test can pick "the LISTEN connection" or "the
one that claims" with a predicate. A blackhole holds bytes instead of dropping them, as TCP
retransmission would deliver them once the route heals; a side that closes meanwhile loses what it
had sent, and the other side learns of the close only after the heal. What the proxy cannot
imitate: kernel-level TCP keepalive failures (its own kernel answers the probes), so only a
check the application makes itself (a statement with a timeout) notices its blackhole.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

_SSL_REQUEST = 80877103
_GSSENC_REQUEST = 80877104
_CANCEL_REQUEST = 80877102
# The most distinct SQL texts kept per connection: enough to tell what a connection is for.
_STATEMENTS_KEPT = 200
# Chunks read ahead of a held (blackholed or delayed) direction: bounds memory, then the
# kernel's buffers fill and the sender blocks, as on a real stalled route.
_QUEUED_CHUNKS = 64

Where = Callable[["ProxiedConnection"], bool]


@dataclass(eq=False)
class ProxiedConnection:
    """One client connection through the proxy, and its upstream twin."""

    index: int
    opened_at: float  # time.monotonic()
    # "startup" (a session), "cancel" (asyncpg's cancel request), or "unknown" until read.
    kind: str = "unknown"
    parameters: dict[str, str] = field(default_factory=dict)
    statements: list[str] = field(default_factory=list)
    delay: float = 0.0
    # Seconds between one side closing and the proxy closing the other: what the last bytes
    # said (a server's "terminating connection" error) arrives well before the close.
    close_delay: float = 0.0
    closed: bool = False
    _flowing: asyncio.Event = field(default_factory=asyncio.Event)
    _sockets: list[asyncio.StreamWriter] = field(default_factory=list)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def application_name(self) -> str | None:
        return self.parameters.get("application_name")

    @property
    def blackholed(self) -> bool:
        return not self._flowing.is_set()

    def blackhole(self) -> None:
        """Stop forwarding in both directions; both sockets stay open."""
        self._flowing.clear()

    def heal(self) -> None:
        self._flowing.set()

    def reset(self) -> None:
        """Close both sides abruptly: an RST (SO_LINGER 0) where the socket is TCP."""
        self.closed = True
        for writer in self._sockets:
            sock = writer.get_extra_info("socket")
            if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()

    def close(self) -> None:
        """Close both sides in good order (one side closed its end)."""
        self.closed = True
        for writer in self._sockets:
            writer.close()
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()

    def ran(self, text: str) -> bool:
        """Whether the client sent SQL containing `text` on this connection."""
        return any(text in statement for statement in self.statements)

    def __repr__(self) -> str:
        what = self.application_name or ",".join(s[:30] for s in self.statements[:3])
        state = "closed" if self.closed else "blackholed" if self.blackholed else "open"
        return f"<connection #{self.index} {self.kind} {state} {what!r}>"


def opened_before(moment: float) -> Where:
    """Connections opened before `moment` (a `time.monotonic()` reading)."""
    return lambda connection: connection.opened_at < moment


def ran(text: str) -> Where:
    """Connections whose client sent SQL containing `text` (e.g. "LISTEN")."""
    return lambda connection: connection.ran(text)


def named(application_name: str) -> Where:
    return lambda connection: connection.application_name == application_name


def _upstream_of(dsn: str) -> tuple[str | None, str, int]:
    """(unix socket path or None, host, port) the DSN points at."""
    parts = urlsplit(dsn)
    query = dict(parse_qsl(parts.query))
    port = parts.port or int(query.get("port", 5432))
    host = query.get("host") or parts.hostname or "localhost"
    if host.startswith("/"):
        return f"{host}/.s.PGSQL.{port}", host, port
    return None, host, port


def _through(dsn: str, port: int) -> str:
    """`dsn` with its server replaced by the proxy's address."""
    parts = urlsplit(dsn)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k not in ("host", "port")]
    user = parts.username or ""
    credentials = f"{user}:{parts.password}@" if parts.password else f"{user}@" if user else ""
    return urlunsplit(
        parts._replace(netloc=f"{credentials}127.0.0.1:{port}", query=urlencode(query))
    )


class _StatementSniffer:
    """Reads the SQL text out of the frontend messages a client sends (Query and Parse)."""

    def __init__(
        self,
        into: list[str],
        on_statement: Callable[[], None],
        on_each: Callable[[bytes], None] = lambda text: None,
    ) -> None:
        self._into = into
        self._on_statement = on_statement
        self._on_each = on_each  # every statement, repeated ones too, before it is forwarded
        self._buffer = bytearray()

    def feed(self, data: bytes) -> None:
        self._buffer += data
        while len(self._buffer) >= 5:
            kind = self._buffer[0]
            (length,) = struct.unpack("!i", self._buffer[1:5])
            if len(self._buffer) < 1 + length:
                return
            body = bytes(self._buffer[5 : 1 + length])
            del self._buffer[: 1 + length]
            if kind == ord("Q"):
                text = body.split(b"\0", 1)[0]
            elif kind == ord("P"):  # statement name, then the query
                text = body.split(b"\0", 2)[1]
            else:
                continue
            self._on_each(text)
            if len(self._into) < _STATEMENTS_KEPT:
                self._add(text)

    def _add(self, text: bytes) -> None:
        statement = text.decode(errors="replace")
        # Each distinct text once: a pool runs its reset query on every release.
        if statement not in self._into:
            self._into.append(statement)
            self._on_statement()


class FaultProxy:
    """Listens on 127.0.0.1 (a free port) and forwards each connection to `target_dsn`'s server
    (TCP or a unix socket). See the module docstring for the controls."""

    def __init__(self, target_dsn: str) -> None:
        self.target_dsn = target_dsn
        self._unix_path, self._host, self._port = _upstream_of(target_dsn)
        self.connections: list[ProxiedConnection] = []
        self._blackhole_new = False
        self._new_delay = 0.0
        self._new_close_delay = 0.0
        self._blackhole_at: list[bytes] = []
        # Startup parameters not passed on to the server, as a connection pooler configured to
        # ignore them does (PgBouncer's `ignore_startup_parameters`).
        self.dropped_parameters: set[str] = set()
        self._server: asyncio.Server | None = None
        # Set (and replaced) whenever a connection opens, closes or sends SQL: `wait_for` wakes.
        self._activity = asyncio.Event()
        self.port = 0

    @property
    def dsn(self) -> str:
        """The DSN of the same database, through the proxy."""
        return _through(self.target_dsn, self.port)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Closes the listening socket and every connection."""
        if self._server is not None:
            self._server.close()
        for connection in self.connections:
            connection.reset()
        tasks = {task for connection in self.connections for task in connection._tasks}
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    # -- controls ---------------------------------------------------------------------------

    def matching(self, where: Where | None = None) -> list[ProxiedConnection]:
        """Open session connections (cancel requests excluded) for which `where` holds."""
        return [
            c
            for c in self.connections
            if not c.closed and c.kind != "cancel" and (where is None or where(c))
        ]

    def blackhole(self, where: Where | None = None) -> list[ProxiedConnection]:
        """Silence the open connections `where` selects; with no `where`, every connection,
        new ones included (accepted, then nothing forwarded) until `heal`. Returns those hit."""
        if where is None:
            self._blackhole_new = True
        hit = [c for c in self.connections if not c.closed and (where is None or where(c))]
        for connection in hit:
            connection.blackhole()
        return hit

    def blackhole_at(self, text: str) -> None:
        """Silence each connection, open or new, as its client sends a statement containing
        `text` (that statement held too), until `heal`: a fault at an exact point, say after
        a COMMIT was answered and before the pool's reset (`RESET ALL`) of that connection."""
        self._blackhole_at.append(text.encode())

    def heal(self) -> None:
        """Everything flows again, held bytes included."""
        self._blackhole_new = False
        self._blackhole_at.clear()
        for connection in self.connections:
            connection.heal()

    def reset(self, where: Where | None = None) -> list[ProxiedConnection]:
        """Abort the open connections `where` selects (all with no `where`). Returns those hit."""
        hit = self.matching(where)
        for connection in hit:
            connection.reset()
        return hit

    def set_delay(self, seconds: float, where: Where | None = None) -> None:
        """Latency added to each chunk, each way; with no `where`, new connections get it too."""
        if where is None:
            self._new_delay = seconds
        for connection in self.connections:
            if where is None or where(connection):
                connection.delay = seconds

    def set_close_delay(self, seconds: float, where: Where | None = None) -> None:
        """Pass on a close this much later than the data before it; with no `where`, new
        connections get it too."""
        if where is None:
            self._new_close_delay = seconds
        for connection in self.connections:
            if where is None or where(connection):
                connection.close_delay = seconds

    async def wait_for(self, where: Where, timeout: float = 10.0) -> ProxiedConnection:
        """The first open session connection for which `where` holds, once there is one."""
        async with asyncio.timeout(timeout):
            while not (found := self.matching(where)):
                await self._activity.wait()
            return found[0]

    def _held_at(self, connection: ProxiedConnection, statement: bytes) -> None:
        if any(text in statement for text in self._blackhole_at):
            connection.blackhole()

    def _changed(self) -> None:
        self._activity.set()
        self._activity = asyncio.Event()

    # -- forwarding ---------------------------------------------------------------------------

    async def _accept(self, client_in: asyncio.StreamReader, client: asyncio.StreamWriter) -> None:
        connection = ProxiedConnection(len(self.connections), time.monotonic())
        connection.delay = self._new_delay
        connection.close_delay = self._new_close_delay
        if not self._blackhole_new:
            connection.heal()
        connection._sockets.append(client)
        self.connections.append(connection)
        task = asyncio.current_task()
        assert task is not None
        connection._tasks.add(task)
        try:
            await self._serve(connection, client_in, client)
        except (OSError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # one side went away, or the proxy closes: the other side follows
        finally:
            if not connection.closed:
                connection.close()
            self._changed()

    async def _serve(
        self,
        connection: ProxiedConnection,
        client_in: asyncio.StreamReader,
        client: asyncio.StreamWriter,
    ) -> None:
        while True:
            (length,) = struct.unpack("!i", await client_in.readexactly(4))
            body = await client_in.readexactly(length - 4)
            (code,) = struct.unpack("!i", body[:4])
            if code not in (_SSL_REQUEST, _GSSENC_REQUEST):
                break
            # Plain text between the client and the proxy, whatever the server offers.
            await connection._flowing.wait()
            client.write(b"N")
            await client.drain()
        startup = struct.pack("!i", length) + body
        if code == _CANCEL_REQUEST:
            connection.kind = "cancel"
        else:
            connection.kind = "startup"
            fields = body[4:].split(b"\0")
            connection.parameters = {
                k.decode(errors="replace"): v.decode(errors="replace")
                for k, v in zip(fields[0::2], fields[1::2], strict=False)
                if k
            }
            if self.dropped_parameters:
                kept = b"".join(
                    f"{key}\0{value}\0".encode()
                    for key, value in connection.parameters.items()
                    if key not in self.dropped_parameters
                )
                body = body[:4] + kept + b"\0"
                startup = struct.pack("!i", len(body) + 4) + body
        self._changed()
        # A new connection during a blackhole hangs here, before reaching the server.
        await connection._flowing.wait()
        if self._unix_path is not None:
            server_in, server = await asyncio.open_unix_connection(self._unix_path)
        else:
            server_in, server = await asyncio.open_connection(self._host, self._port)
        connection._sockets.append(server)
        server.write(startup)
        sniffer = _StatementSniffer(
            connection.statements, self._changed, lambda text: self._held_at(connection, text)
        )
        directions = [
            asyncio.create_task(self._pump(connection, client_in, server, sniffer.feed)),
            asyncio.create_task(self._pump(connection, server_in, client, None)),
        ]
        connection._tasks.update(directions)
        await asyncio.wait(directions, return_when=asyncio.FIRST_COMPLETED)
        # Across a blackhole the other side cannot learn that this one closed: it stays open
        # (a backend keeps running its statement) until the route heals.
        await connection._flowing.wait()
        if connection.close_delay:
            await asyncio.sleep(connection.close_delay)

    async def _pump(
        self,
        connection: ProxiedConnection,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        sniff: Callable[[bytes], None] | None,
    ) -> None:
        """Source to sink, each chunk held for the connection's delay and while blackholed."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(_QUEUED_CHUNKS)

        async def deliver() -> None:
            while True:
                due, chunk = await queue.get()
                if (wait := due - time.monotonic()) > 0:
                    await asyncio.sleep(wait)
                await connection._flowing.wait()
                if not chunk:
                    return
                try:
                    sink.write(chunk)
                    await sink.drain()
                except OSError:
                    return  # the sink went away: its own side of the pump ends the connection

        delivering = asyncio.create_task(deliver())
        connection._tasks.add(delivering)
        try:
            await self._forward(connection, source, queue, delivering, sniff)
        except OSError:
            pass  # the sink or the source went away: the connection closes
        finally:
            delivering.cancel()

    async def _forward(
        self,
        connection: ProxiedConnection,
        source: asyncio.StreamReader,
        queue: asyncio.Queue[tuple[float, bytes]],
        delivering: asyncio.Task[None],
        sniff: Callable[[bytes], None] | None,
    ) -> None:
        while chunk := await source.read(65536):
            if sniff is not None:
                sniff(chunk)
            await queue.put((time.monotonic() + connection.delay, chunk))
        if connection.blackholed:
            # The sender gave up (asyncpg aborts a connection whose statement timed out):
            # what it sent never crosses, as its kernel stops retransmitting.
            return
        await queue.put((time.monotonic() + connection.delay, b""))  # EOF, in order
        await delivering


@pytest.fixture
async def fault_proxy(database_dsn: str) -> AsyncIterator[FaultProxy]:
    """A proxy to the test database; `.dsn` goes through it. Everything closed at the end."""
    proxy = FaultProxy(database_dsn)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()
