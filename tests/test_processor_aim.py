"""Processor faults aimed at a role (a Connect group's leader, a task's worker), and the
rolling restart of processors, against real child processes kept alive by a tiny supervisor."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import pytest

from nemeses.faults.base import FaultError
from nemeses.faults.clients import roll_processors_start
from nemeses.targets import ROLE_SHIFT, FaultContext, resolve_processor
from tests.fake_clients import NoClients


class RoleClients(NoClients):
    """Four processors; instance 7 leads, instance 5 runs every task."""

    processor_roles = ("leader", "task-worker")

    def __init__(self, leader: int | None = 7) -> None:
        self.leader = leader

    def processor_pids(self) -> dict[int, int]:
        return {4: 104, 5: 105, 6: 106, 7: 107}

    def aim_processor(self, role: str, pick: int) -> tuple[int, str] | None:
        if role == "leader":
            return None if self.leader is None else (self.leader, "the leader")
        return 5, f"the worker running task {pick % 3}"


def _ctx(clients: Any) -> FaultContext:
    return FaultContext(cluster=None, clients=clients)  # type: ignore[arg-type]


def test_the_pick_high_bits_choose_a_role() -> None:
    ctx = _ctx(RoleClients())
    plain = resolve_processor(ctx, {"pick": 2})
    assert plain is not None and plain.instance == 6 and plain.why == "processor instance 6"
    leader = resolve_processor(ctx, {"pick": 2 | (1 << ROLE_SHIFT)})
    assert leader is not None and (leader.instance, leader.pid) == (7, 107)
    assert leader.why == "processor instance 7, the leader"
    task = resolve_processor(ctx, {"pick": 2 | (2 << ROLE_SHIFT)})
    assert task is not None and task.instance == 5 and "running task" in task.why
    # A role nobody holds now falls back to the plain pick, and says so.
    gone = resolve_processor(_ctx(RoleClients(leader=None)), {"pick": 2 | (1 << ROLE_SHIFT)})
    assert gone is not None and gone.instance == 6 and "leader unavailable" in gone.why
    # Outside ``among`` a role is not taken either.
    limited = resolve_processor(ctx, {"pick": 1 | (1 << ROLE_SHIFT)}, among={4, 5})
    assert limited is not None and limited.instance == 5


def test_clients_without_roles_resolve_as_before() -> None:
    class Plain(NoClients):
        def processor_pids(self) -> dict[int, int]:
            return {1: 11, 2: 12, 3: 13}

    for pick in (0, 1, 2, 5 | (1 << ROLE_SHIFT), 7 | (3 << ROLE_SHIFT)):
        got = resolve_processor(_ctx(Plain()), {"pick": pick})
        assert got is not None and got.instance == sorted([1, 2, 3])[pick % 3]


class Respawning(NoClients):
    """Three sleeping children; one that exits is replaced by a new instance id, which is
    ready a moment later (``processor_ready``)."""

    def __init__(self, kill_first_successor: bool = False) -> None:
        self.kill_first_successor = kill_first_successor
        self._lock = threading.Lock()
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._next = 0
        self.ready_asks: list[int] = []
        for _ in range(3):
            self._spawn()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _spawn(self) -> None:
        code = (
            "import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
            "time.sleep(60)"
        )
        with self._lock:
            self._children[self._next] = subprocess.Popen([sys.executable, "-c", code])
            self._next += 1

    def _watch(self) -> None:
        while not self._stop.wait(0.05):
            with self._lock:
                dead = [i for i, p in self._children.items() if p.poll() is not None]
                for i in dead:
                    del self._children[i]
            for _ in dead:
                self._spawn()

    def processor_pids(self) -> dict[int, int]:
        with self._lock:
            return {i: p.pid for i, p in self._children.items() if p.poll() is None}

    def processor_ready(self, instance: int) -> bool:
        if self.kill_first_successor and instance == 3:  # another fault kills it, once
            self.kill_first_successor = False
            with self._lock:
                self._children[3].kill()
            return False
        self.ready_asks.append(instance)
        return self.ready_asks.count(instance) > 1  # serving at the second look

    def close(self) -> list[int | None]:
        self._stop.set()
        self._thread.join()
        codes = []
        with self._lock:
            for p in self._children.values():
                p.kill()
                codes.append(p.wait())
        return codes


@pytest.mark.parametrize("clean", [True, False])
def test_roll_restarts_each_processor_once_in_turn(clean: bool) -> None:
    clients = Respawning()
    try:
        before = clients.processor_pids()
        details = roll_processors_start(_ctx(clients), {"clean": clean, "seed": 3})
        after = clients.processor_pids()
        assert sorted(details["targets"]) == sorted(before) and details["clean"] is clean
        assert set(after).isdisjoint(before) and len(after) == 3  # every one replaced, once
        assert sorted(set(clients.ready_asks)) == sorted(after)  # each successor was waited on
    finally:
        clients.close()


def test_roll_needs_processes() -> None:
    with pytest.raises(FaultError):
        roll_processors_start(_ctx(None), {"clean": True})


def test_roll_follows_a_successor_killed_before_it_served() -> None:
    clients = Respawning(kill_first_successor=True)
    try:
        details = roll_processors_start(_ctx(clients), {"clean": True, "seed": 3})
        after = clients.processor_pids()
        assert sorted(details["targets"]) == [0, 1, 2] and len(after) == 3
        assert 3 not in after and min(after) >= 4  # 3 died; its own successor was waited on
    finally:
        clients.close()
