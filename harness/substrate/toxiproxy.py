"""The toxiproxy server every client connection crosses, and a small client for its API.

Each broker advertises its client listener as a toxiproxy listen address, so a workload
never talks to a broker directly: slow links, resets and client-side outages are applied
per node by adding toxics to that node's proxy.
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from common.errors import HarnessError
from common.waits import wait_for

TOXIC_TYPES = (
    "latency",
    "bandwidth",
    "slow_close",
    "timeout",
    "reset_peer",
    "slicer",
    "limit_data",
    "kafka_hold",
)

#: The request-holding toxic (harness/substrate/toxiproxy_server/kafka_hold.go) every proxy
#: carries from its creation, disarmed: it can only follow Kafka's framing on connections
#: it has seen from their first byte.
HOLD_TOXIC = "kafka_hold"


def proxy_name(node_id: int) -> str:
    """The proxy in front of a node's client listener; the same in both backends, so the
    code that aims toxics is shared."""
    return f"n{node_id}"


class ToxiproxyError(HarnessError):
    """The toxiproxy API refused a request."""


class Toxiproxy:
    """A toxiproxy server process on ``127.0.0.1:<api_port>`` and its HTTP API."""

    def __init__(self, binary: Path, api_port: int, log_path: Path, env: dict[str, str]) -> None:
        self.binary = binary
        self.api_port = api_port
        self.log_path = log_path
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        #: False when the server has no ``kafka_hold`` toxic (not the harness's own build).
        self.holds = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def start(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child for its life
        self.proc = subprocess.Popen(
            [str(self.binary), "-host", "127.0.0.1", "-port", str(self.api_port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
            start_new_session=True,
        )
        log.close()
        try:
            wait_for(self._alive, timeout=15, what=f"toxiproxy API on port {self.api_port}")
        except BaseException:
            self.stop()  # a server that never answered is not left behind
            raise

    def _alive(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise HarnessError(
                f"toxiproxy exited with status {self.proc.returncode}; see {self.log_path}"
            )
        return self._request("GET", "/version") is not None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace").strip()
            raise ToxiproxyError(f"toxiproxy {method} {path}: {exc.code} {detail}") from None
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode(errors="replace")

    # --- proxies ----------------------------------------------------------------------

    def create_proxy(self, name: str, listen: str, upstream: str) -> None:
        self._request(
            "POST",
            "/proxies",
            {"name": name, "listen": listen, "upstream": upstream, "enabled": True},
        )
        self._install_hold(name, upstream)

    def _install_hold(self, proxy: str, upstream: str) -> None:
        # Added, then made ready: connections the toxic met before ``ready`` are passed
        # through unparsed, the ones opened after it are followed frame by frame. A stock
        # toxiproxy (a public image) has no such toxic: only late-endtxn then fails.
        attrs = {"upstream": upstream}
        try:
            self.add_toxic(proxy, HOLD_TOXIC, attrs, stream="upstream", name=HOLD_TOXIC)
        except ToxiproxyError as exc:
            if "kafka_hold" not in str(exc) and "toxic type" not in str(exc).lower():
                raise
            self.holds = False
            return
        self.update_toxic(proxy, HOLD_TOXIC, {"ready": True})

    def update_toxic(self, proxy: str, name: str, attributes: dict[str, Any]) -> None:
        self._request("POST", f"/proxies/{proxy}/toxics/{name}", {"attributes": attributes})

    def toxic(self, proxy: str, name: str) -> dict[str, Any]:
        return self._request("GET", f"/proxies/{proxy}/toxics/{name}")

    def hold_request(self, proxy: str, **attributes: Any) -> int:
        """Arm the proxy's hold toxic for one more request; the arm number."""
        if not self.holds:
            raise ToxiproxyError(
                "this toxiproxy server has no kafka_hold toxic (it is not the harness's own "
                "build, harness/substrate/toxiproxy_server): late-endtxn cannot run"
            )
        arm = int(self.toxic(proxy, HOLD_TOXIC)["attributes"]["arm"]) + 1
        self.update_toxic(proxy, HOLD_TOXIC, {**attributes, "arm": arm})
        return arm

    def release_held(self, proxy: str, arm: int, timeout: float = 40.0) -> list[dict[str, Any]]:
        """Disarm, deliver what arm ``arm`` still holds, and return that arm's events once
        the broker has answered every late request (or the delivery failed)."""
        self.update_toxic(proxy, HOLD_TOXIC, {"transactional_id": "", "release": arm})
        events: list[dict[str, Any]] = []

        def answered() -> bool:
            events[:] = self.held_events(proxy, arm)
            return all(e.get("answered_at_ms") for e in events)

        wait_for(answered, timeout=timeout, what=f"the late requests of {proxy} answered")
        return events

    def held_events(self, proxy: str, arm: int | None = None) -> list[dict[str, Any]]:
        events = self.toxic(proxy, HOLD_TOXIC)["attributes"].get("events") or []
        return [e for e in events if arm is None or e.get("arm") == arm]

    def proxies(self) -> dict[str, Any]:
        return self._request("GET", "/proxies")

    def set_enabled(self, name: str, enabled: bool) -> None:
        """``enabled=False`` is the ``down`` fault: the listener closes, connections drop."""
        self._request("POST", f"/proxies/{name}", {"enabled": enabled})

    def add_toxic(
        self,
        proxy: str,
        kind: str,
        attributes: dict[str, Any] | None = None,
        *,
        stream: str = "downstream",
        toxicity: float = 1.0,
        name: str | None = None,
    ) -> str:
        if kind not in TOXIC_TYPES:
            raise ToxiproxyError(f"unknown toxic type {kind!r}; known: {', '.join(TOXIC_TYPES)}")
        toxic_name = name or f"{kind}_{stream}"
        self._request(
            "POST",
            f"/proxies/{proxy}/toxics",
            {
                "name": toxic_name,
                "type": kind,
                "stream": stream,
                "toxicity": toxicity,
                "attributes": attributes or {},
            },
        )
        return toxic_name

    def toxics(self, proxy: str) -> list[dict[str, Any]]:
        return self._request("GET", f"/proxies/{proxy}/toxics")

    def remove_toxic(self, proxy: str, name: str) -> None:
        self._request("DELETE", f"/proxies/{proxy}/toxics/{name}")

    def reset(self) -> None:
        """Remove every fault's toxic and re-enable every proxy; the hold toxic stays (a new
        one could not follow the framing of the connections already open), disarmed."""
        for name, proxy in self.proxies().items():
            if not proxy.get("enabled", True):
                self.set_enabled(name, True)
            for toxic in proxy.get("toxics") or []:
                if toxic["name"] == HOLD_TOXIC:
                    self.update_toxic(name, HOLD_TOXIC, {"transactional_id": ""})
                else:
                    self.remove_toxic(name, toxic["name"])
