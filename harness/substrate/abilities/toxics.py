"""The clients' path to each broker through toxiproxy: the ``nemeses.control.Toxics`` ability."""

from __future__ import annotations

from typing import Any

from common.errors import HarnessError
from harness.substrate.toxiproxy import Toxiproxy, proxy_name


class ProxyToxics:
    """One toxiproxy proxy per node, in front of its client listener."""

    toxiproxy: Toxiproxy | None

    def proxy_name(self, node_id: int) -> str:
        return proxy_name(node_id)

    def _proxy(self) -> Toxiproxy:
        if self.toxiproxy is None:
            raise HarnessError("toxiproxy is not running")
        return self.toxiproxy

    def add_toxic(
        self, node_id: int, kind: str, attributes: dict[str, Any] | None = None, **options: Any
    ) -> str:
        """A toxic on the node's client path; its name (for ``remove_toxic``). ``options``
        are :meth:`Toxiproxy.add_toxic`'s (stream, toxicity, name)."""
        return self._proxy().add_toxic(self.proxy_name(node_id), kind, attributes, **options)

    def remove_toxic(self, node_id: int, name: str) -> None:
        self._proxy().remove_toxic(self.proxy_name(node_id), name)

    def hold_request(self, node_id: int, **attributes: Any) -> int:
        """Arm the node's proxy to withhold one request and deliver it late (the arm number);
        see harness/substrate/toxiproxy_server/kafka_hold.go for the attributes."""
        return self._proxy().hold_request(self.proxy_name(node_id), **attributes)

    def release_held(self, node_id: int, arm: int) -> list[dict[str, Any]]:
        """Disarm; deliver what arm ``arm`` still holds; that arm's events."""
        return self._proxy().release_held(self.proxy_name(node_id), arm)

    def proxy_down(self, node_id: int) -> None:
        self._proxy().set_enabled(self.proxy_name(node_id), False)

    def proxy_up(self, node_id: int) -> None:
        self._proxy().set_enabled(self.proxy_name(node_id), True)
