"""What the share workload asks of Kafka about its group: the group's own settings, its start
offset per share partition, and a look at the start offsets
every few seconds while the run goes on (``share-monitor``'s history: the report plots it).

The start offsets come from Kafka's own ``kafka-share-groups.sh --describe --offsets``
(``ShareGroupCommand``): confluent-kafka's admin client has no share group calls, and the
tool is what an operator would look at.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.errors import HarnessError
from common.kafkaconf import secured
from history import Recorder

if TYPE_CHECKING:
    from workloads.base import ClusterAccess as Cluster


def _admin(bootstrap: str) -> Any:
    """An admin client on the brokers' internal listeners (quiet: its errors are answers)."""
    from confluent_kafka.admin import AdminClient

    return AdminClient(secured({"bootstrap.servers": bootstrap, "log_level": 0}))


def configure_group(bootstrap: str, group: str, settings: dict[str, str]) -> list[str]:
    """Set a group's dynamic settings (``incrementalAlterConfigs`` on the GROUP resource);
    the names the brokers refuse as unknown group settings (an older Kafka: 4.2 has no
    per-group ``share.delivery.count.limit``) are left out and returned, for the caller to
    judge."""
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = _admin(bootstrap)
    wanted, unknown = dict(settings), []
    last: Exception | None = None
    for _attempt in range(5 + len(settings)):
        entries = [
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in wanted.items()
        ]
        resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
        try:
            for future in admin.incremental_alter_configs([resource]).values():
                future.result(timeout=30)
            return unknown
        except Exception as exc:  # a broker still electing: asked again
            last = exc
            name = _unknown_name(str(exc))
            if name in wanted:
                del wanted[name]
                unknown.append(name)
                continue
            time.sleep(1)
    raise HarnessError(f"could not set the share group's settings {sorted(settings)}: {last}")


def _unknown_name(message: str) -> str | None:
    """The setting an ``INVALID_CONFIG`` answer names as unknown, if it does."""
    marker = "Unknown group config name: "
    if marker not in message:
        return None
    return message.split(marker, 1)[1].split('"')[0].split(",")[0].strip()


def broker_setting(bootstrap: str, name: str) -> str | None:
    """A broker setting's value as one broker reports it (None: not reported)."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    admin = _admin(bootstrap)
    brokers = sorted(admin.list_topics(timeout=10).brokers)
    if not brokers:
        return None
    resource = ConfigResource(ResourceType.BROKER, str(brokers[0]))
    for future in admin.describe_configs([resource]).values():
        entry = future.result(timeout=30).get(name)
        return None if entry is None else entry.value
    return None


def share_start_offsets(cluster: Cluster, group: str, topic: str) -> dict[int, int | None]:
    """The group's start offset per partition of ``topic``, as Kafka's own
    ``kafka-share-groups.sh --describe --offsets`` reports it (None: not initialised)."""
    text = cluster.run_tool(
        "ShareGroupCommand",
        "--bootstrap-server",
        cluster.internal_bootstrap,
        "--describe",
        "--group",
        group,
        "--offsets",
    )
    starts: dict[int, int | None] = {}
    for row in _rows(text):
        if row.get("TOPIC") == topic and row.get("PARTITION", "").isdigit():
            start = row.get("START-OFFSET", "-")
            starts[int(row["PARTITION"])] = int(start) if start.lstrip("-").isdigit() else None
    return starts


def _rows(text: str) -> list[dict[str, str]]:
    """The rows of a tool's space-aligned table (the header line names the columns)."""
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    header = next((i for i, ln in enumerate(lines) if "GROUP" in ln and "TOPIC" in ln), None)
    if header is None:
        return []
    names = lines[header]
    return [dict(zip(names, ln, strict=False)) for ln in lines[header + 1 :]]


class StartOffsetMonitor:
    """Looks at the group's start offsets every ``interval`` seconds in a thread of its own,
    each look one ``start-offsets`` op of process ``share-monitor`` (``ok`` with
    ``partitions`` ``[[partition, start], ...]``, ``info`` when the tool failed)."""

    def __init__(
        self, cluster: Cluster, group: str, topic: str, path: Path, interval: float
    ) -> None:
        self.cluster, self.group, self.topic, self.interval = cluster, group, topic, interval
        self.path = path
        self._rec: Recorder | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="share-monitor", daemon=True)

    def start(self) -> None:
        if self.interval > 0 and self._rec is None:
            meta = {"workload": "share", "role": "monitor"}
            self._rec = Recorder(self.path, "share-monitor", meta=meta)
            self._thread.start()

    def _run(self) -> None:
        rec = self._rec
        assert rec is not None
        while not self._stop.wait(self.interval):
            rec.invoke("start-offsets", {"group": self.group})
            try:
                starts = share_start_offsets(self.cluster, self.group, self.topic)
            except HarnessError as exc:
                error = {"code": "QUERY_FAILED", "message": str(exc)[:300]}
                rec.info("start-offsets", {"group": self.group}, error)
                continue
            parts = [[p, s] for p, s in sorted(starts.items())]
            rec.ok("start-offsets", {"group": self.group, "partitions": parts})

    def stop(self) -> None:
        """Idempotent; a look under way finishes (bounded by the tool's timeout)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=90)
        if self._rec is not None:
            self._rec.close()
