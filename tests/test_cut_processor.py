"""``cut-processor``: one client process cut off the network by the group id of its own.

Without a cluster: the group ids and the rules' tags, the fault's start and stop against fakes,
the kind's place in ``all`` and its durations, and (as root) that a supervisor's children run
with their slot's group id. With root and iptables: a rule left by a SIGKILLed run is removed
by the reaper. On a real cluster: a real queue client is cut, cannot reach the brokers while
the other client goes on, and works again after the heal, with the rule gone.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import types
import uuid
from pathlib import Path
from typing import Any

import pytest

from common.waits import wait_for
from harness.substrate import runstate
from harness.substrate.abilities import clientcuts as substrate_base
from history import load_history, read_process_file
from nemeses.faults.base import FaultError
from nemeses.faults.clients import cut_processor_start, cut_processor_stop
from nemeses.kinds import KINDS, parse_nemesis, skipped_by_all
from nemeses.schedule import generate
from nemeses.targets import FaultContext, resolve_processor
from tests.fake_clients import NoClients
from workloads.processes import Supervisor, fs_gid, in_group, spawn_command

ROOT = Path(__file__).resolve().parent.parent
AS_ROOT = os.geteuid() == 0 and bool(shutil.which("iptables"))
needs_root = pytest.mark.skipif(not AS_ROOT, reason="group ids and iptables need root")
#: Group ids of the tests' own children: outside every slot's block, so no cut can hit them.
TEST_GID = runstate.CLIENT_GID_BASE + 990_000


# --- group ids and tags --------------------------------------------------------------------


def test_each_slot_has_a_block_of_group_ids_of_its_own() -> None:
    assert runstate.client_gid(0, 0) == 1_000_000
    assert runstate.client_gid(3, 5) == 1_000_000 + 3 * 64 + 5
    per = runstate.CLIENT_GIDS_PER_SLOT
    assert runstate.client_gid(3, per) is None
    assert runstate.client_gid(runstate.MAX_SLOTS, 0) is None
    assert runstate.client_gid(0, -1) is None
    every = {runstate.client_gid(n, s) for n in range(runstate.MAX_SLOTS) for s in range(per)}
    assert len(every) == runstate.MAX_SLOTS * per and TEST_GID not in every


def test_a_cluster_gives_group_ids_only_with_root_and_a_slot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client_gid = substrate_base.GroupClientCuts.client_gid
    held = types.SimpleNamespace(slot=types.SimpleNamespace(number=2))
    monkeypatch.setattr(substrate_base, "can_cut_clients", lambda: True)
    assert client_gid(held, 1) == runstate.client_gid(2, 1)  # type: ignore[arg-type]
    assert client_gid(held, runstate.CLIENT_GIDS_PER_SLOT) is None  # type: ignore[arg-type]
    # The Docker backend holds no host slot: its clients are spawned as before.
    assert client_gid(types.SimpleNamespace(slot=None), 1) is None  # type: ignore[arg-type]
    monkeypatch.setattr(substrate_base, "can_cut_clients", lambda: False)
    assert client_gid(held, 1) is None  # type: ignore[arg-type]


def test_client_rules_are_found_by_their_exact_tag() -> None:
    listing = "\n".join(
        [
            "-P OUTPUT ACCEPT",
            "-A OUTPUT -m owner --gid-owner 1000130 -m comment "
            "--comment kafka-harness-slot-2-client -j DROP",
            "-A OUTPUT -m owner --gid-owner 1000770 -m comment "
            "--comment kafka-harness-slot-12-client -j DROP",
            "-A OUTPUT -m comment --comment kafka-harness-slot-2 -j ACCEPT",
            '-A OUTPUT -m comment --comment "kafka-harness-slot-2-client x" -j DROP',
            "-A OUTPUT -m comment --comment kafka-harness-slot-x-client -j DROP",
            "-A OUTPUT -m comment --comment kafka-harness-slot-2-clientele -j DROP",
            "-A FORWARD -m comment --comment kafka-harness-slot-2-client -j DROP",
            '-A OUTPUT -m comment --comment "unbalanced -j DROP',
        ]
    )
    assert runstate.client_rules(listing) == [
        (2, runstate.client_rule(2, 1000130)),
        (12, runstate.client_rule(12, 1000770)),
    ]
    # The rule is built in the order iptables lists it, so a listing shows it verbatim.
    assert " ".join(runstate.client_rule(2, 1000130)) in listing


# --- the fault, against fakes --------------------------------------------------------------


class FakeCluster:
    """Cuts are a set of group ids; a cut group reaches nothing unless ``leaky``."""

    def __init__(self, leaky: bool = False) -> None:
        self.cuts: set[int] = set()
        self.calls: list[tuple[str, int]] = []
        self.leaky = leaky

    def cut_client(self, gid: int) -> None:
        self.calls.append(("cut", gid))
        self.cuts.add(gid)

    def heal_client(self, gid: int) -> None:
        self.calls.append(("heal", gid))
        self.cuts.discard(gid)

    def client_reaches(self, gid: int, timeout: float = 2.0) -> bool:
        return self.leaky or gid not in self.cuts

    def heal_all(self) -> None:
        self.cuts.clear()


class FakeClients(NoClients):
    """Three live processors; instance 1 has no group id of its own (spawned without)."""

    def processor_pids(self) -> dict[int, int]:
        return {1: 101, 2: 102, 3: 103}

    def transactional_ids(self) -> dict[int, str]:
        return {i: f"t-{i}" for i in self.processor_pids()}

    def processor_gids(self) -> dict[int, int]:
        return {2: 1_000_002, 3: 1_000_003}


class ClientsWithoutGids(FakeClients):
    def processor_gids(self) -> dict[int, int]:
        return {}


def test_start_cuts_a_live_processor_that_has_a_group_id_and_stop_heals_it() -> None:
    cluster = FakeCluster()
    ctx = FaultContext(cluster, FakeClients())  # type: ignore[arg-type]
    hit = set()
    for pick in range(8):
        details = cut_processor_start(ctx, {"pick": pick})
        instance = details["targets"][0]
        hit.add(instance)
        # The pick is the processor faults' own, among the processors it can act on.
        target = resolve_processor(ctx, {"pick": pick}, among={2, 3})
        assert target is not None and target[:2] == (instance, details["pid"])
        assert details["gid"] == FakeClients().processor_gids()[instance]
        assert cluster.cuts == {details["gid"]} and "cut from every broker" in details["why"]
        assert cut_processor_stop(ctx, details) == {"healed": True}
        assert cluster.cuts == set()
        assert cluster.calls[-2:] == [("cut", details["gid"]), ("heal", details["gid"])]
    assert hit == {2, 3}


def test_start_refuses_what_it_cannot_cut_or_verify() -> None:
    with pytest.raises(FaultError, match="group id of its own"):
        cut_processor_start(FaultContext(FakeCluster(), ClientsWithoutGids()), {"pick": 0})  # type: ignore[arg-type]
    with pytest.raises(FaultError, match="needs workload processes"):
        cut_processor_start(FaultContext(FakeCluster(), None), {"pick": 0})  # type: ignore[arg-type]
    leaky = FakeCluster(leaky=True)
    with pytest.raises(FaultError, match="still reaches"):
        cut_processor_start(FaultContext(leaky, FakeClients()), {"pick": 0})  # type: ignore[arg-type]
    assert leaky.calls == [("cut", 1_000_002)]  # the engine's heal_all undoes it


def test_the_kind_needs_root_and_clients_and_is_in_all() -> None:
    kind = KINDS["cut-processor"]
    assert kind.needs_netns and kind.needs_clients and not kind.instant
    assert not kind.bug_probe and not kind.needs_hooks
    assert "cut-processor" in parse_nemesis("all").kinds()
    assert "cut-processor" in parse_nemesis("all").kinds(hooks=False)
    assert "cut-processor" not in parse_nemesis("all").kinds(netns=False)
    assert "cut-processor" not in parse_nemesis("all").kinds(clients=False)
    skipped = skipped_by_all(netns=False)
    assert skipped["cut-processor"] == skipped["partition"]
    with pytest.raises(ValueError, match="run as root"):
        parse_nemesis("cut-processor").kinds(netns=False)


def test_about_half_the_cuts_outlast_the_session_timeout() -> None:
    """A cut past the session timeout makes a zombie through the network; the others last
    as long as any fault."""
    session, duration = 20.0, 5.0
    sched = generate(
        ["cut-processor"],
        seed=3,
        time_limit=3000,
        interval=5,
        duration=duration,
        session_timeout_s=session,
    )
    lengths = [e.duration for e in sched.events]
    long = [d for d in lengths if d > session]
    short = [d for d in lengths if d <= session]
    assert all(session + 5 <= d <= session + 8 for d in long)
    assert all(0.5 * duration <= d <= 1.5 * duration for d in short)
    assert len(lengths) >= 60 and 0.3 <= len(long) / len(lengths) <= 0.7
    again = generate(
        ["cut-processor"],
        seed=3,
        time_limit=3000,
        interval=5,
        duration=duration,
        session_timeout_s=session,
    )
    assert again.to_json() == sched.to_json()


# --- a supervisor's children run with their slot's group id (root) -------------------------


class _Sleepers(Supervisor):
    """A supervisor of sleeping children."""

    def __init__(self, run_dir: Path, cluster: Any) -> None:
        self.cluster = cluster
        super().__init__(run_dir)

    def _supervisor_meta(self) -> dict[str, Any]:
        return {"role": "supervisor"}

    def _spawn(self, slot: int, replaces: int | None = None) -> Any:
        process = self._allocate_process()
        cmd = [sys.executable, "-c", "import time; time.sleep(60)"]
        log_path = self.logs_dir / f"{process}.log"
        return self._launch(
            slot,
            process,
            replaces,
            None,
            log_path,
            lambda log, gid: spawn_command(cmd, {}, log, gid),
        )

    def close(self) -> None:
        self._stop_watching()
        for child in self._children.values():
            if child.proc.poll() is None:
                child.proc.kill()
            child.proc.wait(timeout=10)
        self._close_files()


def _fake_access(tmp_path: Path) -> Any:
    return types.SimpleNamespace(
        dir=tmp_path,
        bootstrap="127.0.0.1:1",
        client_security=None,
        env=dict(os.environ),
        client_gid=lambda slot: TEST_GID + slot if slot < 2 else None,
    )


@needs_root
def test_supervisor_children_run_with_their_slots_group_id(tmp_path: Path) -> None:
    sup = _Sleepers(tmp_path, _fake_access(tmp_path))
    try:
        for slot in range(3):
            sup._spawn(slot)
        # Slot 2 is beyond the cluster's ids: spawned as before, not a target.
        assert sup.processor_gids() == {0: TEST_GID, 1: TEST_GID + 1}
        pids = {c.slot: c.proc.pid for c in sup._children.values()}
        assert [fs_gid(pids[s]) for s in range(3)] == [TEST_GID, TEST_GID + 1, 0]
        # A successor in the slot runs with the same group id (the slot is what is cut).
        sup._children[0].proc.kill()
        sup._spawn(0, replaces=0)
        assert sup.processor_gids() == {3: TEST_GID, 1: TEST_GID + 1}
    finally:
        sup.close()


@needs_root
def test_a_command_that_makes_its_own_popen_runs_in_the_group(tmp_path: Path) -> None:
    """Kafka's copier is started by ``start_copier``'s own Popen: ``in_group`` wraps it."""
    cmd = ["sh", "-c", "id -g; echo $$"]
    assert in_group(cmd, None) == cmd
    proc = subprocess.Popen(in_group(cmd, TEST_GID + 7), stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=30)
    gid, pid = out.split()
    assert int(gid) == TEST_GID + 7 and int(pid) == proc.pid  # the same process, exec'd


@needs_root
@pytest.mark.parametrize("workload", ["eos", "queue"])
def test_workload_processors_get_their_slots_group_id(tmp_path: Path, workload: str) -> None:
    """The eos processors and the queue clients (Python; the Java twins take the same path)
    are spawned in their slot's group; a processor need not reach a broker for that."""
    access = _fake_access(tmp_path)
    sup: Any
    if workload == "eos":
        from workloads.eos.supervisor import EosOptions, EosWorkload

        sup = EosWorkload(EosOptions(), access, tmp_path)
        sup._client_command = sup._processor_command()  # what start_processors sets
    else:
        from workloads import client_registry
        from workloads.queue.options import QueueOptions
        from workloads.queue.supervisor import QueueWorkload

        options = QueueOptions(topic="t")
        sup = QueueWorkload(options, access, tmp_path, time_limit=30)
        manifest = client_registry.get(options.client)  # what start sets
        sup._client_command = client_registry.command(manifest, "queue", access, None)
    try:
        child = sup._spawn(1)
        assert child.gid == TEST_GID + 1 and fs_gid(child.proc.pid) == TEST_GID + 1
        assert sup.processor_gids() == {child.process: TEST_GID + 1}
    finally:
        sup.close()


# --- the reaper (root) ---------------------------------------------------------------------

_HOLDER = """
import subprocess, time
from harness.substrate import runstate
slot = runstate.acquire_slot(runstate.new_run_id())
gid = runstate.client_gid(slot.number, 0)
subprocess.run(["iptables", "-w", "-I", *runstate.client_rule(slot.number, gid)], check=True)
print(slot.number, flush=True)
time.sleep(600)
"""


@needs_root
@pytest.mark.timeout(120)
def test_a_cut_left_by_a_killed_run_is_removed_by_the_reaper() -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k != runstate.MARKER_ENV},
    )
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line.strip().isdigit(), "the holder did not take a slot"
        number = int(line)
        rule = runstate.client_rule(number, runstate.client_gid(number, 0) or 0)
        assert (number, rule) in runstate.client_rules()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    # SIGKILLed: the rule stays behind until the next start (or `harness reap`) reaps it.
    assert (number, rule) in runstate.client_rules()
    out = subprocess.run(
        [sys.executable, "-m", "harness", "reap"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert out.returncode == 0, out.stderr
    assert all(n != number for n, _ in runstate.client_rules())
    assert runstate.client_tag(number) not in runstate.output_rules()


# --- on a real cluster ----------------------------------------------------------------------


def _acknowledged(op: dict[str, Any]) -> bool:
    """An ok op that took a broker's answer: a send acknowledged, or records read and their
    offsets committed with the transaction (an empty transaction commits without a broker,
    and a poll may read what was fetched before)."""
    if op["type"] != "ok" or op["f"] not in ("send", "poll", "txn"):
        return False
    return any(m[0] == "send" or (m[0] == "poll" and m[1]) for m in op["value"])


def _ok_ops(w: Any, slot: int, after_ns: int = 0) -> int:
    """Acknowledged ops of the processes of one supervisor slot, completed after
    ``after_ns``."""
    with w._lock:
        processes = [p for p, c in w._children.items() if c.slot == slot]
    return sum(
        1
        for p in processes
        if w.history_path(p).exists()  # a successor writes its file at its first op
        for op in read_process_file(w.history_path(p))[1]
        if op["time"] > after_ns and _acknowledged(op)
    )


@needs_root
@pytest.mark.cluster
@pytest.mark.timeout(240)
def test_a_cut_client_cannot_reach_the_brokers_until_healed(
    healthy_cluster: Any, harness_store: Path
) -> None:
    """Two real queue clients; one is cut: it completes no op while the other goes on, a
    connection from its group gets nowhere, and after the heal the rule is gone and its slot
    works again."""
    from workloads.queue.control import QueueClients
    from workloads.queue.options import QueueOptions
    from workloads.queue.supervisor import run_queue

    c = healthy_cluster
    seen: dict[str, Any] = {}

    def cut_one(w: Any) -> None:
        wait_for(
            lambda: all(_ok_ops(w, s) >= 3 for s in (0, 1)),
            timeout=30,
            what="both clients doing ok ops",
        )
        gids = w.processor_gids()
        assert sorted(gids.values()) == [c.client_gid(0), c.client_gid(1)], gids
        ctx = FaultContext(c, QueueClients(w))
        details = KINDS["cut-processor"].start(ctx, {"pick": 0})
        instance, gid = details["targets"][0], details["gid"]
        slot = w._children[instance].slot
        other = 1 - slot
        rule = runstate.client_rule(c.slot.number, gid)
        assert rule in c.client_cuts()
        listing = subprocess.run(["iptables", "-w", "-S", "OUTPUT"], capture_output=True, text=True)
        assert " ".join(rule) in listing.stdout
        assert not c.client_reaches(gid)
        try:
            time.sleep(1.0)  # a reply that was already in its socket may still be read
            cut_at = time.monotonic_ns()
            others_before = _ok_ops(w, other)
            time.sleep(6.0)
            seen["cut_ok"] = _ok_ops(w, slot, cut_at)
            seen["other_ok"] = _ok_ops(w, other) - others_before
        finally:
            KINDS["cut-processor"].stop(ctx, details)
        healed_at = time.monotonic_ns()
        seen["rules_after"] = c.client_cuts()
        seen["reaches_after"] = c.client_reaches(gid)
        wait_for(
            lambda: _ok_ops(w, slot, healed_at) > 0, timeout=40, what="the cut slot works again"
        )
        seen["recovered"] = round((time.monotonic_ns() - healed_at) / 1e9, 1)

    topic = f"q-cut-{uuid.uuid4().hex[:6]}"
    opts = QueueOptions(topic=topic, seed=11, clients=2, sub_via="assign")
    path = run_queue(c, harness_store / "queue" / topic, opts, time_limit=40, during=cut_one)
    print(f"\ncut-processor: {seen}")
    assert seen.get("recovered") is not None, seen
    assert seen["cut_ok"] == 0, seen
    assert seen["other_ok"] > 0, seen
    assert seen["rules_after"] == [] and seen["reaches_after"], seen
    assert load_history(path)  # a well-formed history, the cut client's ops included
    assert c.client_cuts() == []
