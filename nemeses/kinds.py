"""The registry of fault kinds: name -> how to choose parameters, start, stop.

``--nemesis partition,pause,kill`` names kinds from here; ``all`` means every kind that can
run in the environment (partitions and processor cuts need root; processor faults need
processors; moment-aimed faults need processors with hook points). A ``stream`` kind is not
one of the one-after-another faults: it runs as a steady stream of its own beside them
(Jepsen's crash-clients), so processors keep crashing whatever the broker faults do.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from common.kafkaconf import REAUTH_MS
from history.schema import CUTS_CLIENT, FAULT_TRAITS, STOPS_CLIENT
from nemeses.control import ABILITIES
from nemeses.faults import (
    base,
    brokers,
    clients,
    credentials,
    late,
    leaderless,
    moments,
    network,
    quorum,
    topics,
)
from nemeses.faults.base import Action
from nemeses.recipes import RECIPES, Recipe, recipe

Params = Callable[[random.Random, int, bool], dict[str, Any]]


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
    #: The share of its events whose duration exceeds the session timeout as a zombie's
    #: does (the others last as long as any fault); ``zombie=True`` is all of them.
    zombie_share: float = 0.0
    #: A floor on its length, in seconds (each drawn 0-3 s above it, or the asked-for
    #: duration when that is longer): ``reauth-pause`` must outlast the clients' sessions.
    min_duration_s: float = 0.0
    needs_hooks: bool = False  # processors must be able to act at a protocol moment
    stream: bool = False  # a steady stream beside the other faults (see schedule.generate)
    #: Aimed at a known Kafka bug: ``all`` leaves it out (a correct client would be judged
    #: by Kafka's bug, not its own conduct); name it, or use a recipe that does.
    bug_probe: bool = False
    #: The cluster abilities it acts through (``nemeses.control.ABILITIES``): ``all`` leaves
    #: it out on a cluster without one of them, and naming it there is refused.
    needs: tuple[str, ...] = ()
    #: What it does to the client processes it is aimed at (``history.schema.FAULT_TRAITS``:
    #: ``stops-client``, ``cuts-client``); the engine records them in its ``start`` ops, so a
    #: workload reads them from the history without knowing any kind by name.
    traits: frozenset[str] = frozenset()
    description: str = ""

    def __post_init__(self) -> None:
        unknown = sorted(self.traits - FAULT_TRAITS)
        if unknown:
            raise ValueError(f"fault kind {self.name}: unknown traits {', '.join(unknown)}")


KINDS: dict[str, FaultKind] = {
    k.name: k
    for k in [
        FaultKind(
            "partition",
            network.partition_params,
            network.partition_start,
            network.partition_stop,
            needs=("network",),
            needs_netns=True,
            description="iptables cuts between node namespaces: isolate, halves, "
            "bridge, ring; aimed at a coordinator, a leader or the controller",
        ),
        FaultKind(
            "client-cut",
            network.client_cut_params,
            network.client_cut_start,
            network.client_cut_stop,
            needs=("toxics",),
            description="toxiproxy down / timeout on one node's client path",
        ),
        FaultKind(
            "pause",
            brokers.broker_params,
            brokers.pause_start,
            brokers.pause_stop,
            needs=("signals",),
            description="SIGSTOP a broker, SIGCONT at the end",
        ),
        FaultKind(
            "kill",
            brokers.kill_params,
            brokers.kill_start,
            brokers.kill_stop,
            needs=("signals",),
            description="kill -9 (or clean stop) a broker, restart it at the end",
        ),
        FaultKind(
            "restart",
            brokers.rolling_params,
            brokers.rolling_start,
            base.noop_stop,
            needs=("signals",),
            instant=True,
            description="rolling restart of all brokers, clean or hard",
        ),
        FaultKind(
            "slow",
            network.slow_params,
            network.slow_start,
            base.toxic_stop,
            needs=("toxics",),
            description="toxiproxy latency+jitter, bandwidth or slicer on one node",
        ),
        FaultKind(
            "late-request",
            late.late_request_params,
            late.late_request_start,
            base.toxic_stop,
            needs=("toxics",),
            description="hold one node's client->broker path past the transaction "
            "timeout, then let it through (KIP-890 late arrival)",
        ),
        FaultKind(
            "late-endtxn",
            late.late_endtxn_params,
            late.late_endtxn_start,
            late.late_endtxn_stop,
            needs=("toxics",),
            needs_clients=True,
            bug_probe=True,
            description="withhold a processor's EndTxn at its coordinator's proxy (the "
            "client retries it) and deliver the original after the next transaction began "
            "(KAFKA-17754's delayed EndTxn)",
        ),
        FaultKind(
            "late-produce",
            late.late_produce_params,
            late.late_produce_start,
            late.late_produce_stop,
            needs=("toxics",),
            needs_clients=True,
            bug_probe=True,
            description="withhold a processor's Produce at a partition leader's proxy (the "
            "client retries it) and deliver the original after its transaction's EndTxn "
            "(KIP-890's late produce request)",
        ),
        FaultKind(
            "pause-processor",
            base.processor_params,
            clients.processor_pause_start,
            clients.processor_pause_stop,
            needs_clients=True,
            traits=frozenset({STOPS_CLIENT}),
            description="SIGSTOP a processor for less than its session timeout",
        ),
        FaultKind(
            "zombie",
            base.processor_params,
            clients.zombie_start,
            clients.processor_pause_stop,
            needs_clients=True,
            zombie=True,
            traits=frozenset({STOPS_CLIENT}),
            description="SIGSTOP a processor past its session timeout, then resume "
            "it: the KIP-447 zombie",
        ),
        FaultKind(
            "cut-processor",
            base.processor_params,
            clients.cut_processor_start,
            clients.cut_processor_stop,
            needs=("client-cuts",),
            needs_netns=True,
            needs_clients=True,
            zombie_share=0.5,
            traits=frozenset({CUTS_CLIENT}),
            description="iptables cuts one processor (its own group id) from every broker, "
            "both ways; half the cuts outlast its session timeout: a zombie through the "
            "network",
        ),
        FaultKind(
            "kill-processor",
            base.processor_params,
            clients.processor_kill_start,
            base.noop_stop,
            needs_clients=True,
            instant=True,
            description="SIGKILL a processor; the workload starts a new instance",
        ),
        FaultKind(
            "roll-processors",
            clients.roll_params,
            clients.roll_processors_start,
            base.noop_stop,
            needs_clients=True,
            instant=True,
            description="restart every processor in turn (SIGTERM, or SIGKILL for a hard "
            "roll), each successor serving before the next goes down",
        ),
        FaultKind(
            "crash-clients",
            moments.crash_params,
            moments.crash_start,
            moments.crash_stop,
            needs_clients=True,
            stream=True,
            description="a steady stream of processor crashes, each armed to SIGKILL "
            "itself at a protocol moment (between produce, offset commit and EndTxn); "
            "a plain SIGKILL for clients without hook points",
        ),
        FaultKind(
            "pause-at",
            moments.moment_params,
            moments.pause_at_start,
            clients.processor_pause_stop,
            needs_clients=True,
            needs_hooks=True,
            traits=frozenset({STOPS_CLIENT}),
            description="a processor SIGSTOPs itself at a protocol moment, SIGCONT at the end",
        ),
        FaultKind(
            "coordinator-at",
            moments.coordinator_params,
            moments.coordinator_at_start,
            moments.coordinator_at_stop,
            needs=("signals", "network", "toxics"),
            needs_clients=True,
            needs_hooks=True,
            description="pause, isolate or client-cut a processor's transaction or group "
            "coordinator while its EndTxn or offset commit is about to go out",
        ),
        FaultKind(
            "leaderless-marker",
            leaderless.leaderless_params,
            leaderless.leaderless_start,
            leaderless.leaderless_stop,
            needs=("signals", "topics"),
            needs_clients=True,
            needs_hooks=True,
            bug_probe=True,
            traits=frozenset({STOPS_CLIENT}),
            description="a processor held before its EndTxn while the output partitions, "
            "moved to one broker that is not its coordinator, have no leader (that broker "
            "killed) when its transaction times out (Kafka 4.3 on skips the abort markers: "
            "finding F9)",
        ),
        FaultKind(
            "controller-cut",
            quorum.controller_cut_params,
            quorum.controller_cut_start,
            quorum.controller_cut_stop,
            needs=("network",),
            needs_netns=True,
            needs_clients=True,
            bug_probe=True,
            description="the broker coordinating most of the clients' groups cut from the "
            "controllers and its followers (its controller port, its inter-broker listener) "
            "while the clients still reach it, the offsets partitions holding their groups "
            "moved, three fresh groups per such partition committing past the divergence "
            "through the other brokers (Kafka 4.x before 4.3.1 acknowledges commits it then "
            "loses: KAFKA-20634, finding F14)",
        ),
        FaultKind(
            "add-partitions",
            topics.add_partitions_params,
            topics.add_partitions_start,
            base.noop_stop,
            needs=("topics",),
            needs_clients=True,
            instant=True,
            bug_probe=True,
            description="add one or two partitions to the clients' input topic under load "
            "(a share group starting them at the latest offset loses what was written to "
            "them first: KAFKA-20742)",
        ),
        FaultKind(
            "acl-revoke",
            credentials.acl_revoke_params,
            credentials.acl_revoke_start,
            credentials.acl_revoke_stop,
            needs=("credentials",),
            needs_clients=True,
            description="a secured cluster's ACLs of the clients on their transactional "
            "ids, group or topics withdrawn for the fault's length, then given back",
        ),
        FaultKind(
            "credential-rotate",
            base.processor_params,
            partial(credentials.credential_rotate_start, roll=clients.roll_processors_start),
            base.noop_stop,
            needs=("credentials",),
            instant=True,
            description="a secured cluster's client password (sasl_ssl) or key and "
            "certificate (tls) replaced under load, then the processors restarted in turn "
            "to read it; one refused at its re-authentication before its turn exits 8",
        ),
        FaultKind(
            "reauth-pause",
            brokers.broker_params,
            brokers.reauth_pause_start,
            brokers.pause_stop,
            needs=("signals", "reauth"),
            min_duration_s=REAUTH_MS / 1000 + 2.0,
            description="on sasl_ssl, SIGSTOP a broker for longer than the clients' SASL "
            "sessions last (connections.max.reauth.ms), SIGCONT at the end: it then closes "
            "every connection that does not re-authenticate first (KIP-368)",
        ),
        FaultKind(
            "hijack",
            base.processor_params,
            clients.hijack_start,
            base.noop_stop,
            needs_clients=True,
            instant=True,
            description="init_transactions with a live processor's transactional.id",
        ),
    ]
}


def unavailable(
    kind: FaultKind,
    *,
    netns: bool = True,
    clients: bool = True,
    hooks: bool = True,
    abilities: frozenset[str] = frozenset(ABILITIES),
) -> str | None:
    """Why ``kind`` cannot run in this environment, or None: the one list of reasons that
    ``all`` skips a kind for and that refuses a kind named outright."""
    lacking = [a for a in kind.needs if a not in abilities]
    if kind.needs_netns and not netns:
        return "partitions need network namespaces (run as root)"
    if kind.needs_clients and not clients:
        return "it needs a workload with processors"
    if kind.needs_hooks and not hooks:
        return "the client has no protocol hook points"
    if lacking:
        return f"the cluster has no {', '.join(lacking)} ability"
    return None


def skipped_by_all(
    *,
    netns: bool = True,
    clients: bool = True,
    hooks: bool = True,
    abilities: frozenset[str] = frozenset(ABILITIES),
) -> dict[str, str]:
    """The kinds ``all`` leaves out in this environment, each with the reason."""
    out = {}
    for k in KINDS.values():
        why = unavailable(k, netns=netns, clients=clients, hooks=hooks, abilities=abilities)
        if k.bug_probe:
            out[k.name] = "aimed at a known Kafka bug; name it to run it"
        elif why is not None:
            out[k.name] = why
    return out


@dataclass(frozen=True)
class NemesisSpec:
    """What ``--nemesis`` said, parsed once: ``none``, ``all``, a comma list of kinds, or a
    recipe. Names are checked when it is parsed; which kinds run is decided against the
    environment (:meth:`kinds`), where ``all`` leaves some out with a reason (:meth:`skipped`).
    """

    text: str = "none"
    #: The kinds named (a recipe's); empty for ``none`` and ``all``.
    names: tuple[str, ...] = ()
    every: bool = False
    recipe: Recipe | None = None

    def __str__(self) -> str:
        return self.text

    @property
    def none(self) -> bool:
        return not self.every and not self.names

    def skipped(
        self,
        *,
        netns: bool = True,
        clients: bool = True,
        hooks: bool = True,
        abilities: frozenset[str] = frozenset(ABILITIES),
    ) -> dict[str, str]:
        """The kinds ``all`` leaves out here, with the reasons (nothing for named kinds)."""
        if not self.every:
            return {}
        return skipped_by_all(netns=netns, clients=clients, hooks=hooks, abilities=abilities)

    def kinds(
        self,
        *,
        netns: bool = True,
        clients: bool = True,
        hooks: bool = True,
        abilities: frozenset[str] = frozenset(ABILITIES),
    ) -> list[str]:
        """The kinds that run here; a one-line ValueError for a named kind that cannot."""
        if self.every:
            skip = self.skipped(netns=netns, clients=clients, hooks=hooks, abilities=abilities)
            return [name for name in KINDS if name not in skip]
        for n in self.names:
            why = unavailable(
                KINDS[n], netns=netns, clients=clients, hooks=hooks, abilities=abilities
            )
            if why is not None:
                raise ValueError(f"--nemesis {n} cannot run here: {why}")
        return list(self.names)


def parse_nemesis(text: str) -> NemesisSpec:
    """``"all"``, ``"none"``, a recipe's name or a comma list of kinds; an unknown name is a
    one-line ValueError."""
    text = text.strip()
    if text in ("", "none"):
        return NemesisSpec()
    if text == "all":
        return NemesisSpec(text, every=True)
    named = recipe(text)
    names = list(named.kinds) if named else [s.strip() for s in text.split(",") if s.strip()]
    unknown = [n for n in names if n not in KINDS]
    if unknown:
        raise ValueError(
            f"unknown nemesis {unknown[0]!r}; known: all, none, {', '.join(KINDS)}, "
            f"or a recipe: {', '.join(RECIPES)}"
        )
    return NemesisSpec(text, tuple(dict.fromkeys(names)), recipe=named)
