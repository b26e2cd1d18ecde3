"""A broker process stopped, continued, killed, stopped cleanly and started again."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from common.waits import wait_for
from harness.kafka.wire import fetch_metadata
from harness.substrate.abilities.nodes import N, Nodes, host_port


class ProcessSignals(Nodes[N]):
    """The ``nemeses.control.Signals`` ability: per-node verbs, a restart seen registered."""

    if TYPE_CHECKING:  # the look-ups' (a stub here would shadow them)

        def registered_brokers(self) -> set[int]: ...

    def node_state(self, node_id: int) -> str | None:
        return self.node(node_id).state()

    def node_alive(self, node_id: int) -> bool:
        return self.node(node_id).alive()

    def pause(self, node_id: int) -> None:
        self.node(node_id).pause()

    def resume(self, node_id: int) -> None:
        self.node(node_id).resume()

    def kill(self, node_id: int) -> None:
        self.node(node_id).kill()

    def stop_node(self, node_id: int) -> bool:
        return self.node(node_id).stop()

    def restart(self, node_id: int, *, clean: bool = False, timeout: float = 60.0) -> None:
        """Stop (clean or kill -9) and start again on the same data; waits until registered."""
        node = self.node(node_id)
        if clean:
            node.stop()
        else:
            node.kill()
        self.start_node(node_id, timeout=timeout)

    def start_node(self, node_id: int, timeout: float = 60.0) -> None:
        """Start a stopped node on its data and wait until it is registered again.

        The other brokers' lists alone cannot say so: after a SIGKILL they keep listing the
        dead incarnation until the controller fences it (broker.session.timeout.ms, 9 s by
        default), so a restart checked that way could pass before the new JVM had even
        logged a line (seen: "restarted" 5 s before the broker re-registered). The new
        incarnation must answer itself and list itself, and the others must list it.
        """
        self.node(node_id).start()
        self._after_node_start(node_id)
        wait_for(
            lambda: self._lists_itself(node_id) and node_id in self.registered_brokers(),
            timeout=timeout,
            what=f"node {node_id} registered after restart",
        )

    def _lists_itself(self, node_id: int) -> bool:
        """Whether the node answers a metadata request and counts itself among the live."""
        node = self.node(node_id)
        if not node.running():
            return False
        try:
            host, port = host_port(node.internal_address)
            return node_id in fetch_metadata(host, port, [], node_id)[0]
        except (OSError, struct.error):
            return False

    def _after_node_start(self, node_id: int) -> None:
        """What a backend must redo for a node that came back (before it registers)."""
