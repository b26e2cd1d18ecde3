"""The nodes every ability acts on, and how to reach one directly."""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from common.errors import HarnessError


class Node(Protocol):
    @property
    def node_id(self) -> int: ...

    @property
    def internal_address(self) -> str:
        """``host:port`` of the listener the harness asks directly (never through toxics)."""
        ...

    @property
    def logs(self) -> str:
        """Where a reader finds this node's output (named in start-up errors)."""
        ...

    def state(self) -> str | None: ...

    def alive(self) -> bool: ...

    def running(self) -> bool:
        """Alive and not frozen: worth a metadata request."""
        ...

    def start(self) -> None: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def kill(self) -> None: ...

    def stop(self, timeout: float = 30.0) -> bool: ...


N = TypeVar("N", bound=Node)


def host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


class Nodes(Generic[N]):
    """The cluster's nodes by id, and the ones a partition left outside its majority (whose
    view of the metadata may be stale)."""

    nodes: list[N]
    _cut: set[int]

    def node(self, node_id: int) -> N:
        if not 1 <= node_id <= len(self.nodes):
            raise HarnessError(f"no node {node_id} (cluster has {len(self.nodes)})")
        return self.nodes[node_id - 1]

    def node_ids(self) -> list[int]:
        return [n.node_id for n in self.nodes]
