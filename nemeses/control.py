"""What a nemesis may touch, as structural interfaces.

Nemeses do not import the harness or the workloads: they are handed objects that have these
methods. A cluster's abilities are small protocols (:class:`Lookups`, :class:`NetworkFaults`,
:class:`Signals`, :class:`Toxics`, :class:`ClientCuts`, :class:`Topics`), as Jepsen's
optional database abilities are: a fault kind names the ones it needs, and ``all`` leaves out
the kinds a cluster cannot serve (:func:`abilities_of`). The harness's backends have them all
(:class:`ClusterControl`). The clients are one protocol every workload satisfies in full,
``history.clientcontrol.ClientControl`` (the contract both sides import). Unit tests hand in
fakes; integration tests the real things.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Lookups(Protocol):
    """Who holds a role now: what every aimed fault resolves its symbolic target with."""

    def node_ids(self) -> list[int]: ...
    def leader(self, topic: str, partition: int) -> int | None:
        """The partition's leader, or None while it has none."""
        ...

    def group_coordinator(self, group_id: str) -> int | None: ...
    def txn_coordinator(self, transactional_id: str) -> int | None: ...
    def coordinator_partition(self, topic: str, key: str) -> int:
        """The partition of a coordinators' log (``__share_group_state``, ...) that holds
        ``key`` (``history.clientcontrol.StateKey``): the brokers' settings size the log."""
        ...

    def isr(self, topic: str, partition: int) -> list[int]: ...
    def active_controller(self) -> int: ...
    def registered_brokers(self) -> set[int]: ...


@runtime_checkable
class NetworkFaults(Protocol):
    """Cuts between brokers (iptables in their namespaces or containers), probed."""

    @property
    def uses_netns(self) -> bool: ...
    def partition(self, *groups: list[int]) -> None: ...
    def cut_controller(self, node_id: int, *, followers: bool = False) -> None:
        """Cut a node from the controller quorum (its controller port, both ways), and
        with ``followers`` its followers from it (its inter-broker listener closed to its
        peers); undone by :meth:`heal`."""
        ...

    def heal(self) -> None: ...
    def can_reach(self, src: int, dst: int) -> bool: ...


@runtime_checkable
class Signals(Protocol):
    """A broker process stopped, continued, killed, stopped cleanly and started again."""

    def pause(self, node_id: int) -> None: ...
    def resume(self, node_id: int) -> None: ...
    def kill(self, node_id: int) -> None: ...
    def stop_node(self, node_id: int) -> bool: ...
    def start_node(self, node_id: int, timeout: float = 60.0) -> None: ...
    def restart(self, node_id: int, *, clean: bool = False, timeout: float = 60.0) -> None: ...
    def node_state(self, node_id: int) -> str | None: ...
    def node_alive(self, node_id: int) -> bool: ...


@runtime_checkable
class Toxics(Protocol):
    """The clients' path to each broker through a proxy (toxiproxy): toxics, a proxy down,
    a request held and delivered late."""

    def add_toxic(
        self, node_id: int, kind: str, attributes: dict[str, Any] | None = None, **options: Any
    ) -> str: ...
    def remove_toxic(self, node_id: int, name: str) -> None: ...
    def hold_request(self, node_id: int, **attributes: Any) -> int: ...
    def release_held(self, node_id: int, arm: int) -> list[dict[str, Any]]: ...
    def proxy_down(self, node_id: int) -> None: ...
    def proxy_up(self, node_id: int) -> None: ...


@runtime_checkable
class ClientCuts(Protocol):
    """One client process off the network by its group id (root iptables, owner match)."""

    def cut_client(self, gid: int) -> None:
        """Cut every client process of group ``gid`` (``ClientControl.processor_gids``) off
        the network, both ways; verified in the rules before it returns."""
        ...

    def heal_client(self, gid: int) -> None:
        """Undo :meth:`cut_client` (verified)."""
        ...

    def client_reaches(self, gid: int, timeout: float = 2.0) -> bool:
        """Probe: whether a process of group ``gid`` gets an answer from the brokers' client
        addresses."""
        ...


@runtime_checkable
class Topics(Protocol):
    """A topic changed under load: partitions added or moved, a setting changed, through
    the admin API and Kafka's tools."""

    def partition_count(self, topic: str) -> int: ...

    def set_topic_config(self, topic: str, key: str, value: str | None) -> None:
        """Set one of ``topic``'s settings (None: back to the brokers' default)."""
        ...

    def replicas(self, topic: str, partition: int) -> list[int]:
        """The partition's replicas, preferred leader first."""
        ...

    def reassign(self, topic: str, moves: dict[int, list[int]], timeout: float = 60.0) -> None:
        """Move each partition of ``moves`` to its replicas; returns once they are its
        replicas and all in sync."""
        ...

    def add_partitions(self, topic: str, total: int, timeout: float = 60.0) -> None:
        """Grow ``topic`` to ``total`` partitions; returns once every partition has a
        leader and a full ISR."""
        ...


@runtime_checkable
class Credentials(Protocol):
    """A secured cluster's (``--security``) ACLs and credentials changed under load: the
    clients' ACLs on one kind of resource withdrawn and given back, their password or
    certificate replaced. A cluster has it only while ``secured``."""

    @property
    def secured(self) -> bool: ...

    def withdraw_client_acls(self, resource: str) -> list[str]:
        """Delete the clients' ACLs on ``resource`` (topic, group, transactional_id); what
        they were, in words."""
        ...

    def restore_client_acls(self, resource: str) -> list[str]: ...

    def rotate_client_credentials(self) -> str:
        """Replace the clients' SCRAM password (or key and certificate); what was done."""
        ...


@runtime_checkable
class Reauthentication(Protocol):
    """A cluster whose clients' SASL sessions run out (KIP-368's ``connections.max.reauth.ms``),
    so they re-authenticate on live connections. A cluster has it only while ``reauth_ms``
    is set (``sasl_ssl``)."""

    @property
    def reauth_ms(self) -> int | None: ...


#: The abilities a fault kind may need (``nemeses.kinds.FaultKind.needs``), by name.
ABILITIES: dict[str, type] = {
    "network": NetworkFaults,
    "signals": Signals,
    "toxics": Toxics,
    "client-cuts": ClientCuts,
    "topics": Topics,
    "credentials": Credentials,
    "reauth": Reauthentication,
}
#: What a cluster of an ability's type must also be, now, to have it.
_ONLY_WHILE: dict[type, Any] = {
    Credentials: lambda c: c.secured,
    Reauthentication: lambda c: c.reauth_ms is not None,
}


def abilities_of(cluster: object) -> frozenset[str]:
    """The abilities ``cluster`` has (every one, for None: a schedule made before a cluster
    exists assumes a full one, and the cluster is asked again when the faults start)."""
    if cluster is None:
        return frozenset(ABILITIES)
    return frozenset(
        name
        for name, ability in ABILITIES.items()
        if isinstance(cluster, ability) and _ONLY_WHILE.get(ability, lambda c: True)(cluster)
    )


class ClusterControl(
    Lookups,
    NetworkFaults,
    Signals,
    Toxics,
    ClientCuts,
    Topics,
    Credentials,
    Reauthentication,
    Protocol,
):
    """Every ability together, and undoing every fault at once: what both of the harness's
    backends offer (``harness.substrate.api.Cluster`` extends it)."""

    def heal_all(self) -> None: ...
