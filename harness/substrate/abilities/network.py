"""Cuts between brokers: the ``nemeses.control.NetworkFaults`` ability."""

from __future__ import annotations

from common.errors import HarnessError
from harness.substrate.abilities.nodes import N, Nodes


class NetworkCuts(Nodes[N]):
    """Partitions as groups of nodes; a backend cuts and heals the links
    (``_cut_links``/``_heal_links``: iptables in namespaces or in containers)."""

    def partition(self, *groups: list[int]) -> None:
        """Cut every node of each group from every node of every other group."""
        for g in groups:
            for i in g:
                self.node(i)
        self._cut_links(groups)
        # Nodes outside the largest group are the ones whose metadata may go stale.
        largest = max(groups, key=len)
        for g in groups:
            if g is not largest:
                self._cut.update(g)

    def _cut_links(self, groups: tuple[list[int], ...]) -> None:
        raise NotImplementedError

    def cut_controller(self, node_id: int, *, followers: bool = False) -> None:
        """Cut ``node_id`` from the controller quorum: its controller port dropped both
        ways, while replication and the clients' traffic still flow (the controller fences
        it and moves its partitions; it goes on acting as their leader). With
        ``followers``, its inter-broker listener is closed to its peers as well: its
        followers cannot fetch from it, so whatever it writes from then on is on its log
        alone, while it still fetches from its own leaders. Undone by :meth:`heal`."""
        self.node(node_id)
        self._cut_controller_link(node_id, followers)
        self._cut.add(node_id)  # its metadata goes stale

    def _cut_controller_link(self, node_id: int, followers: bool) -> None:
        raise HarnessError(
            f"the {getattr(self, 'backend', 'this')} backend cannot cut a node from the "
            "controllers alone (the process backend can)"
        )

    def isolate(self, node_id: int) -> None:
        others = [n.node_id for n in self.nodes if n.node_id != node_id]
        self.partition([node_id], others)

    def heal(self) -> None:
        """Undo every partition."""
        self._heal_links()
        self._cut.clear()

    def _heal_links(self) -> None:
        raise NotImplementedError
