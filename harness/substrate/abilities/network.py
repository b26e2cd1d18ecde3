"""Cuts between brokers: the ``nemeses.control.NetworkFaults`` ability."""

from __future__ import annotations

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

    def isolate(self, node_id: int) -> None:
        others = [n.node_id for n in self.nodes if n.node_id != node_id]
        self.partition([node_id], others)

    def heal(self) -> None:
        """Undo every partition."""
        self._heal_links()
        self._cut.clear()

    def _heal_links(self) -> None:
        raise NotImplementedError
