"""The registry of fault kinds: name -> how to choose parameters, start, stop.

``--nemesis partition,pause,kill`` names kinds from here; ``all`` means every kind that can
run in the environment (partitions need namespaces; processor faults need processors).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nemeses import faults as f
from nemeses.targets import FaultContext

Params = Callable[[random.Random, int, bool], dict[str, Any]]
Action = Callable[[FaultContext, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class FaultKind:
    name: str
    params: Params
    start: Action
    stop: Action
    needs_netns: bool = False
    needs_clients: bool = False
    instant: bool = False  # the whole fault happens in start (e.g. a rolling restart)
    zombie: bool = False  # duration must exceed the processors' session timeout
    description: str = ""


KINDS: dict[str, FaultKind] = {
    k.name: k
    for k in [
        FaultKind(
            "partition",
            f.partition_params,
            f.partition_start,
            f.partition_stop,
            needs_netns=True,
            description="iptables cuts between node namespaces: isolate, halves, "
            "bridge, ring; aimed at a coordinator, a leader or the controller",
        ),
        FaultKind(
            "client-cut",
            f.client_cut_params,
            f.client_cut_start,
            f.client_cut_stop,
            description="toxiproxy down / timeout on one node's client path",
        ),
        FaultKind(
            "pause",
            f.broker_params,
            f.pause_start,
            f.pause_stop,
            description="SIGSTOP a broker, SIGCONT at the end",
        ),
        FaultKind(
            "kill",
            f.kill_params,
            f.kill_start,
            f.kill_stop,
            description="kill -9 (or clean stop) a broker, restart it at the end",
        ),
        FaultKind(
            "restart",
            f.rolling_params,
            f.rolling_start,
            f.noop_stop,
            instant=True,
            description="rolling restart of all brokers, clean or hard",
        ),
        FaultKind(
            "slow",
            f.slow_params,
            f.slow_start,
            f.toxic_stop,
            description="toxiproxy latency+jitter, bandwidth or slicer on one node",
        ),
        FaultKind(
            "late-request",
            f.late_request_params,
            f.late_request_start,
            f.toxic_stop,
            description="hold one node's client->broker path past the transaction "
            "timeout, then let it through (KIP-890 late arrival)",
        ),
        FaultKind(
            "pause-processor",
            f.processor_params,
            f.processor_pause_start,
            f.processor_pause_stop,
            needs_clients=True,
            description="SIGSTOP a processor for less than its session timeout",
        ),
        FaultKind(
            "zombie",
            f.processor_params,
            f.zombie_start,
            f.processor_pause_stop,
            needs_clients=True,
            zombie=True,
            description="SIGSTOP a processor past its session timeout, then resume "
            "it: the KIP-447 zombie",
        ),
        FaultKind(
            "kill-processor",
            f.processor_params,
            f.processor_kill_start,
            f.noop_stop,
            needs_clients=True,
            instant=True,
            description="SIGKILL a processor; the workload starts a new instance",
        ),
        FaultKind(
            "hijack",
            f.processor_params,
            f.hijack_start,
            f.noop_stop,
            needs_clients=True,
            instant=True,
            description="init_transactions with a live processor's transactional.id",
        ),
    ]
}


def parse_kinds(spec: str, *, netns: bool = True, clients: bool = True) -> list[str]:
    """``"all"``, ``"none"`` or a comma list; unknown names are a one-line ValueError."""
    spec = spec.strip()
    if spec in ("", "none"):
        return []
    if spec == "all":
        return [
            k.name
            for k in KINDS.values()
            if (netns or not k.needs_netns) and (clients or not k.needs_clients)
        ]
    names = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [n for n in names if n not in KINDS]
    if unknown:
        raise ValueError(f"unknown nemesis {unknown[0]!r}; known: all, none, {', '.join(KINDS)}")
    if not netns and any(KINDS[n].needs_netns for n in names):
        raise ValueError("partition faults need network namespaces (run as root)")
    if not clients and any(KINDS[n].needs_clients for n in names):
        raise ValueError("processor faults need a workload with processors")
    return list(dict.fromkeys(names))
