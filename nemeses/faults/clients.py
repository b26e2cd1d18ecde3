"""Client process faults: a processor paused (briefly, or past its session timeout: a
zombie), killed, rolled, cut off the network by its group id, or impersonated."""

from __future__ import annotations

import contextlib
import os
import random
import signal
from typing import Any

from common.procfs import catches_signal, process_state
from history.clientcontrol import ClientControl
from nemeses.faults.base import (
    FaultError,
    processor,
    resume,
    verify,
)
from nemeses.targets import (
    FaultContext,
    resolve_processor,
)


def processor_pause_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    instance, pid, why = processor(ctx, params)
    os.kill(pid, signal.SIGSTOP)
    verify(lambda: process_state(pid) == "T", 10, f"processor {instance} (pid {pid}) in state T")
    return {"targets": [instance], "pid": pid, "why": why}


def processor_pause_stop(ctx: FaultContext, details: dict[str, Any]) -> dict[str, Any]:
    pid = details["pid"]
    resume(pid)
    verify(lambda: process_state(pid) != "T", 10, f"pid {pid} resumed")
    return {"resumed": details["targets"]}


def zombie_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    """Pause a processor mid-transaction, for longer than its session timeout.

    An outside SIGSTOP almost always lands while the client waits in poll, and on resume
    librdkafka notices the lost membership before it commits anything. A GC pause that
    makes a zombie lands *between* produce and commit; clients that support it are asked
    (SIGUSR1) to stop themselves at their next offset commit. Others, and a processor that
    has no SIGUSR1 handler yet (still starting: the signal would kill it), are stopped
    directly.
    """
    instance, pid, why = processor(ctx, params)
    assert ctx.clients is not None  # ``processor`` found one of its processes
    if ctx.clients.pause_at_commit and catches_signal(pid, signal.SIGUSR1):
        os.kill(pid, signal.SIGUSR1)
        try:
            verify(lambda: process_state(pid) in ("T", None), 20, f"processor {instance} paused")
            mode = "at-commit"
        except FaultError:
            os.kill(pid, signal.SIGSTOP)  # it never reached a commit (no input): stop it now
            verify(lambda: process_state(pid) in ("T", None), 10, f"processor {instance} paused")
            mode = "external"
    else:
        os.kill(pid, signal.SIGSTOP)
        verify(lambda: process_state(pid) in ("T", None), 10, f"processor {instance} paused")
        mode = "external"
    return {
        "targets": [instance],
        "pid": pid,
        "mode": mode,
        "why": f"{why}, paused past its session timeout",
    }


def processor_kill_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    instance, pid, why = processor(ctx, params)
    os.kill(pid, signal.SIGKILL)
    verify(lambda: process_state(pid) in (None, "Z"), 10, f"processor {instance} gone")
    return {"targets": [instance], "pid": pid, "why": why}


#: Seconds a processor has to stop after SIGTERM in a clean roll before it is SIGKILLed, and
#: for its successor to be serving (a Connect worker JVM scans its plugins and rejoins).
ROLL_STOP_S = 30.0


ROLL_READY_S = 90.0


def roll_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    return {"clean": rng.random() < 0.5, "seed": rng.randrange(1 << 30)}


def _stop_pid(pid: int, sig: signal.Signals) -> None:
    """``sig`` to a process and wait until it is gone (SIGCONT first: a paused process cannot
    act on SIGTERM); one that has not stopped after ROLL_STOP_S is SIGKILLed."""
    resume(pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
    try:
        verify(lambda: process_state(pid) in (None, "Z"), ROLL_STOP_S, f"pid {pid} stopped")
    except FaultError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        verify(lambda: process_state(pid) in (None, "Z"), 10, f"pid {pid} killed")


def _wait_successor(clients: ClientControl, before: set[int]) -> None:
    """Wait until an instance started after ``before`` (the instance ids then) serves. Any
    of them: a successor killed by another fault meanwhile has a successor of its own."""

    def serving() -> bool:
        new = set(clients.processor_pids()) - before
        return any(clients.processor_ready(i) for i in new)

    verify(serving, ROLL_READY_S, "a successor of the stopped processor serving")


def roll_processors_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    """Restart every processor in turn, as an operator's rolling deploy does (Kafka's own
    Connect system test bounces workers cleanly and hard): each is stopped (SIGTERM, or
    SIGKILL for a hard roll), and the next goes down only once the workload has started its
    successor and that successor serves again."""
    if ctx.clients is None:
        raise FaultError("roll-processors needs workload processes")
    clients = ctx.clients
    clean = bool(params.get("clean"))
    order = sorted(clients.processor_pids())
    random.Random(params.get("seed", 0)).shuffle(order)
    rolled: list[int] = []
    for instance in order:
        before = clients.processor_pids()
        pid = before.get(instance)
        if pid is None:  # gone already (another fault); its successor is someone else's
            continue
        _stop_pid(pid, signal.SIGTERM if clean else signal.SIGKILL)
        _wait_successor(clients, set(before))
        rolled.append(instance)
    return {
        "targets": rolled,
        "clean": clean,
        "why": f"{'clean' if clean else 'hard'} rolling restart of the processors",
    }


def cut_processor_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    """Cut one processor off the network, both ways: an iptables rule in the root namespace
    drops every packet of its group id (each supervisor slot's processes run with a group id
    of their own), so it cannot reach a broker through any proxy, and no answer reaches it.

    Its slot is cut, as a partition cuts off the machine it runs on: a successor started in
    the slot during the cut is cut too. Verified by the rule in ``iptables -S`` and by a
    probe connection from the same group that gets no answer. A cut that outlasts the
    session timeout makes a zombie through the network (KIP-447): the group moves on while
    the processor still holds its transaction.
    """
    if ctx.clients is None:
        raise FaultError("cut-processor needs workload processes")
    gids = ctx.clients.processor_gids()
    found = resolve_processor(ctx, params, among=gids)
    if found is None:
        raise FaultError(
            "no live processor runs with a group id of its own (root and a host slot needed)"
        )
    instance, pid, why = found
    gid = gids[instance]
    ctx.cluster.cut_client(gid)  # verified in the rules before it returns
    # A cut connect hangs until the probe's timeout: keep it short (the cut is on already).
    if ctx.cluster.client_reaches(gid, timeout=1.0):
        raise FaultError(f"group {gid} still reaches the brokers after the cut")
    return {
        "targets": [instance],
        "pid": pid,
        "gid": gid,
        "why": f"{why} (group {gid}) cut from every broker",
    }


def cut_processor_stop(ctx: FaultContext, details: dict[str, Any]) -> dict[str, Any]:
    gid = details["gid"]
    ctx.cluster.heal_client(gid)  # verified gone from the rules
    verify(lambda: ctx.cluster.client_reaches(gid), 10, f"group {gid} reaches the brokers")
    return {"healed": True}


_HIJACK = """
import sys
from confluent_kafka import Producer
from common.kafkaconf import secured
p = Producer(secured({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[2],
                      "log_level": 0}))
p.init_transactions(60)
p.flush(5)
"""


def hijack_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    """Call init_transactions with a live processor's transactional.id: fence it directly.

    The impostor is a separate OS process, as a competing instance would be; it also keeps
    a native client's life and death out of the harness process.
    """
    import subprocess
    import sys

    if ctx.clients is None:
        raise FaultError("hijack needs workload processes")
    tids = ctx.clients.transactional_ids()
    if not tids:
        raise FaultError("no live processor to hijack")
    instance = sorted(tids)[int(params.get("pick", 0)) % len(tids)]
    tid = tids[instance]
    proc = subprocess.run(
        [sys.executable, "-c", _HIJACK, ctx.clients.bootstrap, tid],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise FaultError(f"init_transactions as {tid} failed: {last}")
    return {"targets": [instance], "why": f"fence {tid} by a new producer", "transactional_id": tid}
