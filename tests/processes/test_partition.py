"""Two hosts (network namespaces, tests/processes/hosts.py) run workers on one queue against one
PostgreSQL; one host's link goes silent while its jobs run. Its jobs are rescued, within seconds,
by the other host: the server's keepalives end the cut-off worker's liveness connection, which
frees its lock. The cut-off worker stops its own attempts, since it lost that connection. When
the link comes back, its late outcome is refused: each job's final state and result are the
other host's, and it joins the fleet again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest

from starlette_jobs import JobRecord, Jobs, JobStatus
from tests.processes.cluster import Cluster
from tests.processes.hosts import Host, Network, hosts_or_skip
from tests.processes.support import LoggedProcess, count, eventually, read_run_log, wait_until
from tests.processes.worker_app import gated

# Long enough that a lease's expiry (at least 20 s after the cut, as leases are renewed every
# 10 s) cannot be what rescues the jobs: the freed liveness lock does, after the server's
# keepalives (5 s idle, 3 probes 2 s apart: ~11 s).
LEASE = "30"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@dataclass
class Fleet:
    hosts: list[Host]
    dsn: str  # the test's own, over the loopback
    host_dsns: list[str]  # each host's, over its link
    start: Callable[..., LoggedProcess]  # start(host_index, *worker_args)


@pytest.fixture
def fleet(run_log: Path) -> Iterator[Fleet]:
    """Two hosts and a PostgreSQL listening on their links; every worker started is killed,
    the server stopped and the namespaces removed at the end, whatever happened."""
    hosts_or_skip()
    network = Network(2)
    started: list[LoggedProcess] = []
    cluster: Cluster | None = None
    try:
        network.create()
        cluster = Cluster(("127.0.0.1", *(host.gateway for host in network.hosts)))
        with (cluster.data / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {network.subnet} trust\n")
        cluster.start()
        asyncio.run(_create_database(cluster.dsn))
        port = cluster.port

        def start(index: int, *args: str) -> LoggedProcess:
            host = network.hosts[index]
            worker = host.worker(*args, dsn=host_dsns[index], run_log=run_log)
            started.append(worker)
            return worker

        host_dsns = [f"postgresql://postgres@{host.gateway}:{port}/jobs" for host in network.hosts]
        yield Fleet(network.hosts, f"postgresql://postgres@127.0.0.1:{port}/jobs", host_dsns, start)
    finally:
        for worker in started:
            worker.kill()
        if cluster is not None:
            cluster.remove()
        network.remove()


async def _create_database(dsn: str) -> None:
    connection = await asyncpg.connect(dsn)
    await connection.execute("CREATE DATABASE jobs")
    await connection.close()


async def test_a_partitioned_hosts_jobs_run_on_the_other_host_and_its_late_outcome_is_refused(
    fleet: Fleet, run_log: Path, tmp_path: Path
) -> None:
    gates = [tmp_path / f"gate-{n}" for n in range(3)]
    async with Jobs(fleet.dsn, queues={}) as jobs:  # migrates the database
        cut_off = fleet.start(0, "--queue", "default=5", "--lease-duration", LEASE)
        await asyncio.to_thread(cut_off.wait_for, "started on queues")
        ids = await gated.enqueue_many([{"n": n, "gate": str(gates[n])} for n in range(3)])

        def started_on(process: LoggedProcess, kind: str = "start") -> set[int]:
            return {e.n for e in read_run_log(run_log) if e.kind == kind and e.pid == process.pid}

        await asyncio.to_thread(
            wait_until, lambda: started_on(cut_off) == {0, 1, 2}, what="3 starts on host 0"
        )
        rescuer = fleet.start(1, "--queue", "default=5", "--lease-duration", LEASE)
        await asyncio.to_thread(rescuer.wait_for, "started on queues")
        assert {worker.pid for worker in await jobs.workers()} == {cut_off.pid, rescuer.pid}

        fleet.hosts[0].cut()
        cut_at = time.monotonic()
        # Job 0 ends on the far side of the partition: its outcome cannot reach the database.
        gates[0].touch()
        await asyncio.to_thread(
            wait_until, lambda: 0 in started_on(cut_off, "done"), what="job 0 done on host 0"
        )

        # The cut-off worker finds its liveness connection gone and stops its attempts.
        await asyncio.to_thread(
            cut_off.wait_for, "lost the connection that holds its liveness lock", 30
        )
        await asyncio.to_thread(
            wait_until, lambda: started_on(cut_off, "cancelled") == {1, 2}, what="attempts stopped"
        )

        # Host 1 takes all three jobs, within seconds rather than the 30 s lease.
        await asyncio.to_thread(
            wait_until, lambda: started_on(rescuer) == {0, 1, 2}, 30, "the jobs run on host 1"
        )
        rescued_after = time.monotonic() - cut_at
        print(f"jobs of the partitioned host running on the other host {rescued_after:.1f} s "
              f"after the cut (lease {LEASE} s)")  # fmt: skip
        assert rescued_after < float(LEASE) - 5
        for n in (1, 2):
            gates[n].touch()

        async def all_succeeded() -> bool:
            records = [await jobs.get(job_id) for job_id in ids]
            return all(r is not None and r.status is JobStatus.SUCCEEDED for r in records)

        await eventually(all_succeeded, timeout=15, what="the three jobs succeeded on host 1")
        before_heal = [await jobs.get(job_id) for job_id in ids]

        fleet.hosts[0].heal()
        # The late outcome reaches the database, which refuses it: the lease is not its own.
        await asyncio.to_thread(
            cut_off.wait_for, f"job {ids[0]}: outcome 'succeeded' not recorded", 40
        )

        async def both_listed() -> bool:
            return {worker.pid for worker in await jobs.workers()} == {cut_off.pid, rescuer.pid}

        # Its row was deleted with its jobs; back on the network, it writes it again.
        await eventually(both_listed, timeout=30, what="the healed worker listed again")
        after_heal = [await jobs.get(job_id) for job_id in ids]

    assert after_heal == before_heal
    for record in after_heal:
        assert isinstance(record, JobRecord)
        assert (record.status, record.result, record.attempts) == (
            JobStatus.SUCCEEDED,
            rescuer.pid,
            2,
        )
        [error] = record.errors
        assert error["error"] == f"worker {error['worker_id']} died: its liveness connection closed"
    events = read_run_log(run_log)
    assert count(events, "start") == {0: 2, 1: 2, 2: 2}
    # Job 0's work was done on both hosts (the user sees it twice: at-least-once); the stopped
    # attempts did none of theirs.
    assert count(events, "done") == {0: 2, 1: 1, 2: 1}
    assert count(events, "cancelled") == {1: 1, 2: 1}
    assert started_on(rescuer, "done") == {0, 1, 2}
