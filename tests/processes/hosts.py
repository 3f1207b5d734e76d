"""Hosts of a test's own on one machine: network namespaces, each joined to the machine by a
veth pair with an address of its own, and a PostgreSQL of the test's own that listens on the
machine's end of every link (tests/processes/cluster.py).

The server sits on the links themselves, not behind a forwarder: its end of each connection is
the one that crosses the link, so its TCP keepalives (which a worker's liveness connection turns
on) see a host vanish, as on a real network. `Host.cut()` takes the link down on the machine's
side: nothing is closed or refused, the host's packets go nowhere (a silent partition), and the
server's probes find no route; `Host.heal()` brings it back, and connections still open carry on.

Needs root and `ip` (iproute2); `hosts_or_skip()` says why not otherwise. The names carry the
test run's pid and a random token, so concurrent runs never meet, and the namespaces of a run
that died without cleaning up are removed by the next one.
"""

from __future__ import annotations

import ipaddress
import os
import random
import re
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.processes.support import APP, ROOT, LoggedProcess

_PREFIX = "starlette-jobs-test"
_NAMESPACE = re.compile(rf"^{_PREFIX}-(\d+)-")


def hosts_or_skip() -> None:
    """Skips the test where network namespaces cannot be made: not root, or no `ip`."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (CI runs as root)")
    if shutil.which("ip") is None:
        pytest.skip("no `ip` command (iproute2) to make network namespaces")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@dataclass(frozen=True)
class Host:
    namespace: str
    link: str  # the machine's end of the veth pair
    address: str  # the host's own, inside its namespace
    gateway: str  # the machine's end: where the server listens for this host

    def cut(self) -> None:
        """A silent partition: the link goes down, nothing is closed."""
        _ip("link", "set", self.link, "down")

    def heal(self) -> None:
        _ip("link", "set", self.link, "up")

    def worker(self, *args: str, dsn: str, run_log: Path, app: str = APP) -> LoggedProcess:
        """`python -m starlette_jobs worker APP ARGS` on this host. `ip netns exec` runs the
        command in its own process, so the process's pid is the worker's."""
        return LoggedProcess(
            ["ip", "netns", "exec", self.namespace,
             sys.executable, "-m", "starlette_jobs", "worker", app, *args],
            cwd=ROOT,
            env={**os.environ, "DATABASE_URL": dsn, "RUN_LOG": str(run_log)},
        )  # fmt: skip


class Network:
    """`count` hosts, made by `create`, gone after `remove` (which is safe to call after a
    partial `create`)."""

    def __init__(self, count: int) -> None:
        token = secrets.token_hex(3)
        subnet = _free_subnet()
        self.subnet = str(subnet)
        # A /30 per host inside the /24: .1 the machine's end, .2 the host's.
        self.hosts = [
            Host(
                namespace=f"{_PREFIX}-{os.getpid()}-{token}-{index}",
                link=f"sj{token}{index}",
                address=str(subnet[4 * index + 2]),
                gateway=str(subnet[4 * index + 1]),
            )
            for index in range(count)
        ]

    def create(self) -> None:
        _remove_namespaces_of_dead_runs()
        for host in self.hosts:
            _ip("netns", "add", host.namespace)
            _ip("link", "add", host.link, "type", "veth",
                "peer", "name", "eth0", "netns", host.namespace)  # fmt: skip
            _ip("addr", "add", f"{host.gateway}/30", "dev", host.link)
            _ip("link", "set", host.link, "up")
            _ip("-n", host.namespace, "addr", "add", f"{host.address}/30", "dev", "eth0")
            _ip("-n", host.namespace, "link", "set", "eth0", "up")
            _ip("-n", host.namespace, "link", "set", "lo", "up")
            # Neighbours known for good: a cut link must not answer "no route to host" once an
            # ARP request goes unanswered; packets just vanish, as past a real switch.
            _ip("-n", host.namespace, "neigh", "replace", host.gateway,
                "lladdr", _mac(host.link), "dev", "eth0", "nud", "permanent")  # fmt: skip

    def remove(self) -> None:
        for host in self.hosts:
            # Deleting either end deletes the pair; a namespace goes with its last process.
            subprocess.run(["ip", "link", "del", host.link], capture_output=True)
            subprocess.run(["ip", "netns", "del", host.namespace], capture_output=True)


def _mac(link: str) -> str:
    """The hardware address of an interface of the machine's own namespace."""
    return Path(f"/sys/class/net/{link}/address").read_text().strip()


def _free_subnet() -> ipaddress.IPv4Network:
    """A 10.x.y.0/24 that no interface of the machine uses (other test runs included)."""
    used = subprocess.run(
        ["ip", "-o", "-4", "addr", "show"], check=True, capture_output=True, text=True
    ).stdout
    taken = [
        ipaddress.ip_interface(word).network
        for line in used.splitlines()
        for word in line.split()
        if "/" in word and word[0].isdigit()
    ]
    for _ in range(100):
        subnet = ipaddress.IPv4Network(
            f"10.{random.randint(100, 254)}.{random.randint(0, 255)}.0/24"
        )
        if not any(subnet.overlaps(other) for other in taken):
            return subnet
    raise AssertionError("no free 10.x.y.0/24 for the test's hosts")


def _remove_namespaces_of_dead_runs() -> None:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for line in listed.splitlines():
        name = line.split()[0] if line.split() else ""
        found = _NAMESPACE.match(name)
        if found and not Path(f"/proc/{found.group(1)}").exists():
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
