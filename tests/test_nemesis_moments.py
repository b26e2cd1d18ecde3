"""Moment-aimed faults against fake clients: what is armed, what is recorded, what is undone.

The real processors are exercised in tests/test_nemesis_faults.py (cluster); here the client
view is a fake whose processes are real sleeping children, so kills and stops are verified
through the kernel as in a run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from common.procfs import process_state
from nemeses.faults import base
from nemeses.faults import clients as client_faults
from nemeses.faults import moments as moment_faults
from nemeses.targets import FaultContext
from tests.fake_clients import NoClients


class FakeClients(NoClients):
    """Sleeping children standing in for processors; ``arm_hook`` fires at once."""

    def __init__(self, n: int, hooks: bool = True, reach: bool = True) -> None:
        self.hooks = hooks
        self.reach = reach
        self.procs = {
            i: subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            for i in range(1, n + 1)
        }
        self.armed: dict[int, tuple[str, str]] = {}
        self.fired: dict[int, dict[str, Any]] = {}

    def processor_pids(self) -> dict[int, int]:
        return {i: p.pid for i, p in self.procs.items() if p.poll() is None}

    def transactional_ids(self) -> dict[int, str]:
        return {i: f"t-{i}" for i in self.processor_pids()}

    def arm_hook(self, instance: int, at: str, action: str, delay_ms: int = 0) -> None:
        if not at:
            self.armed.pop(instance, None)
            return
        self.armed[instance] = (at, action)
        if self.reach:  # the processor reaches its moment right away
            self.fired[instance] = {"at": at, "action": action, "txn": 4, "pid": 0}
            sig = signal.SIGKILL if action == "kill" else signal.SIGSTOP
            os.kill(self.procs[instance].pid, sig)

    def fired_hook(self, instance: int) -> dict[str, Any] | None:
        return self.fired.get(instance)


class FakeCluster:
    uses_netns = False

    def __init__(self) -> None:
        self.paused: list[int] = []
        self.killed: list[int] = []

    def txn_coordinator(self, tid: str) -> int:
        return 2

    def group_coordinator(self, group: str) -> int:
        return 3

    def pause(self, node: int) -> None:
        self.paused.append(node)

    def resume(self, node: int) -> None:
        self.paused.remove(node)

    def node_state(self, node: int) -> str:
        return "T" if node in self.paused else "S"

    def proxy_down(self, node: int) -> None:
        self.paused.append(node)

    def proxy_up(self, node: int) -> None:
        self.paused.remove(node)

    def kill(self, node: int) -> None:
        self.killed.append(node)

    def node_alive(self, node: int) -> bool:
        return node not in self.killed

    def start_node(self, node: int) -> None:
        self.killed.remove(node)


@pytest.fixture
def clients() -> Iterator[FakeClients]:
    c = FakeClients(3)
    yield c
    for p in c.procs.values():
        if p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
        p.wait()


def test_crash_clients_arms_each_processor_at_its_moment_and_records_the_hits(
    clients: FakeClients,
) -> None:
    ctx = FaultContext(FakeCluster(), clients)  # type: ignore[arg-type]
    moments = ["after-flush", "after-commit", "during-commit"]
    details = moment_faults.crash_start(ctx, {"pick": 1, "delay_ms": 3, "moments": moments})
    assert details["mode"] == "armed"
    assert details["armed"] == {"2": "after-flush", "3": "after-commit", "1": "during-commit"}
    result = moment_faults.crash_stop(ctx, details)
    assert sorted((h["instance"], h["at"], h["txn"]) for h in result["hit"]) == [
        (1, "during-commit", 4),
        (2, "after-flush", 4),
        (3, "after-commit", 4),
    ]
    assert result["missed"] == []
    assert all(p.poll() is not None for p in clients.procs.values())


def test_crash_clients_disarms_what_did_not_fire() -> None:
    c = FakeClients(1, reach=False)
    try:
        ctx = FaultContext(FakeCluster(), c)  # type: ignore[arg-type]
        details = moment_faults.crash_start(ctx, {"pick": 0, "moments": ["before-commit"]})
        result = moment_faults.crash_stop(ctx, details)
        assert result == {"hit": [], "missed": [{"instance": 1, "at": "before-commit"}]}
        assert c.armed == {}  # disarmed
        assert c.procs[1].poll() is None
    finally:
        c.procs[1].kill()
        c.procs[1].wait()


def test_crash_clients_without_hooks_kills_directly() -> None:
    c = FakeClients(2, hooks=False)
    try:
        ctx = FaultContext(FakeCluster(), c)  # type: ignore[arg-type]
        details = moment_faults.crash_start(ctx, {"pick": 1, "moments": ["after-flush"]})
        assert details["mode"] == "direct" and details["targets"] == [2]
        assert c.procs[2].wait(timeout=10) == -signal.SIGKILL
        assert moment_faults.crash_stop(ctx, details) == {}
    finally:
        for p in c.procs.values():
            p.kill()
            p.wait()


def test_coordinator_at_pauses_that_processors_coordinator_then_lets_it_continue(
    clients: FakeClients,
) -> None:
    cluster = FakeCluster()
    ctx = FaultContext(cluster, clients)  # type: ignore[arg-type]
    params = {"pick": 0, "at": "before-commit", "fault": "pause", "mode": "down"}
    details = moment_faults.coordinator_at_start(ctx, params)
    # EndTxn goes to the transaction coordinator of instance 1's transactional id.
    assert details["targets"] == [2] and details["processor"] == 1
    assert details["at"] == "before-commit" and details["txn"] == 4
    assert "t-1" in details["why"]
    assert cluster.paused == [2]
    assert process_state(clients.procs[1].pid) not in ("T", None)  # continued into it
    moment_faults.coordinator_at_stop(ctx, details)
    assert cluster.paused == []


def test_coordinator_at_pinned_to_kill_sigkills_the_coordinator_and_restarts_it(
    clients: FakeClients,
) -> None:
    """The coordinator-kill recipe: the transaction coordinator SIGKILLed (never a clean
    stop) while the processor waits at before-commit, which then goes on into its EndTxn."""
    cluster = FakeCluster()
    ctx = FaultContext(cluster, clients)  # type: ignore[arg-type]
    params = {"pick": 0, "at": "before-commit", "fault": "kill", "mode": "down"}
    details = moment_faults.coordinator_at_start(ctx, params)
    assert details["fault"] == "kill" and details["clean"] is False
    assert details["targets"] == [2] and cluster.killed == [2]
    assert process_state(clients.procs[1].pid) not in ("T", None)
    moment_faults.coordinator_at_stop(ctx, details)
    assert cluster.killed == []


def test_coordinator_at_partition_without_namespaces_cuts_the_client_path(
    clients: FakeClients,
) -> None:
    cluster = FakeCluster()
    ctx = FaultContext(cluster, clients)  # type: ignore[arg-type]
    params = {"pick": 2, "at": "after-commit", "fault": "partition", "mode": "down"}
    details = moment_faults.coordinator_at_start(ctx, params)
    assert details["fault"] == "client-cut" and details["targets"] == [3]  # group coordinator
    assert cluster.paused == [3]
    moment_faults.coordinator_at_stop(ctx, details)
    assert cluster.paused == []


def test_pause_at_needs_hooks_and_a_reached_moment() -> None:
    c = FakeClients(1, hooks=False)
    try:
        ctx = FaultContext(FakeCluster(), c)  # type: ignore[arg-type]
        with pytest.raises(base.FaultError, match="hook points"):
            moment_faults.pause_at_start(ctx, {"pick": 0, "at": "after-flush"})
    finally:
        c.procs[1].kill()
        c.procs[1].wait()


def test_pause_at_stops_the_processor_at_its_moment(clients: FakeClients) -> None:
    ctx = FaultContext(FakeCluster(), clients)  # type: ignore[arg-type]
    details = moment_faults.pause_at_start(ctx, {"pick": 0, "at": "before-offsets"})
    assert details["at"] == "before-offsets" and details["txn"] == 4
    assert process_state(clients.procs[1].pid) == "T"
    client_faults.processor_pause_stop(ctx, details)
    assert process_state(clients.procs[1].pid) != "T"
