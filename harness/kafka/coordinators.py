"""Who coordinates what: the look-ups that let a fault be aimed at the right node.

A group's coordinator is the leader of partition ``abs(hash(group)) % N`` of
``__consumer_offsets``; a transactional id's coordinator is the leader of the same function's
partition of ``__transaction_state`` (``hash`` being Java's ``String.hashCode`` and ``abs``
Kafka's ``Utils.abs``, which maps ``Integer.MIN_VALUE`` to 0). A share group's share
coordinator for one share partition (KIP-932) is the leader of the same function's partition
of ``__share_group_state``, for the key group id, topic id (Kafka's ``Uuid`` string: URL-safe
base64, unpadded) and partition joined by colons (the key is built on the clients' side,
``workloads.share.control``). N is the log's partition count; a broker takes it from the
topic's metadata, or from the setting in :data:`LOG_PARTITIONS` while the topic does not
exist yet, and creates the topic with that setting, so on the harness's clusters the setting
is the count. Computing this locally costs nothing and needs no JVM; the tests cross-check
it against the brokers' own answer, and the share keys against Kafka's own classes.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from typing import Protocol

from common.errors import HarnessError


class Cluster(Protocol):
    """What asking the brokers needs of a cluster (both substrate backends have it)."""

    @property
    def internal_bootstrap(self) -> str: ...

    def run_tool(self, simple_name: str, *args: str, timeout: float = 60.0) -> str: ...


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(key: str, partitions: int) -> int:
    return kafka_abs(java_string_hash(key)) % partitions


#: Each coordinators' log, with the broker setting that sizes it and Kafka's default for it.
LOG_PARTITIONS: dict[str, tuple[str, int]] = {
    "__consumer_offsets": ("offsets.topic.num.partitions", 50),
    "__transaction_state": ("transaction.state.log.num.partitions", 50),
    "__share_group_state": ("share.coordinator.state.topic.num.partitions", 50),
}


def log_partition_for(topic: str, key: str, settings: Mapping[str, str]) -> int:
    """The partition of coordinators' log ``topic`` that holds ``key``, for brokers with
    ``settings`` (Kafka's default where they leave the size unset)."""
    setting, default = LOG_PARTITIONS[topic]
    return partition_for(key, int(settings.get(setting, default)))


def active_controller(cluster: Cluster) -> int:
    """The current KRaft quorum leader, as the quorum itself reports it."""
    out = cluster.run_tool(
        "MetadataQuorumCommand",
        "--bootstrap-server",
        cluster.internal_bootstrap,
        "describe",
        "--status",
    )
    return parse_leader_id(out)


def parse_leader_id(text: str) -> int:
    """``LeaderId`` from ``kafka-metadata-quorum.sh describe --status`` (either backend runs
    the tool: a local JVM or inside a broker container)."""
    m = re.search(r"^LeaderId:\s*(\d+)", text, re.M)
    if not m:
        raise HarnessError(f"no LeaderId in metadata quorum status: {text.strip()[:200]}")
    return int(m.group(1))


def describe_transaction_coordinator(cluster: Cluster, transactional_id: str) -> int:
    """The transaction coordinator as the brokers report it (Kafka's TransactionsCommand)."""
    out = cluster.run_tool(
        "TransactionsCommand",
        "--bootstrap-server",
        cluster.internal_bootstrap,
        "describe",
        "--transactional-id",
        transactional_id,
    )
    lines = [[c.strip() for c in ln.split("\t")] for ln in out.splitlines() if "\t" in ln]
    for header, row in itertools.pairwise(lines):
        if "CoordinatorId" in header:
            return int(row[header.index("CoordinatorId")])
    raise HarnessError(f"unexpected TransactionsCommand output: {out.strip()[:200]}")
