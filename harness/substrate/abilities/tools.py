"""Kafka's own tools, the project's Java clients and topics, from the cluster's installation:
what a workload uses of a cluster besides its addresses (``workloads.base.ClusterAccess``)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.errors import HarnessError
from common.kafkaconf import command_config, secured
from common.waits import wait_for
from harness.kafka import javaclients, tools

if TYPE_CHECKING:
    from harness.kafka.install import Installation
    from workloads.base import JavaApp


class KafkaTools:
    """Topics through an admin client; tools and Java clients from the installation's jars."""

    install: Installation | None
    settings: dict[str, str]
    _admin: Any

    if TYPE_CHECKING:  # the backend's

        @property
        def internal_bootstrap(self) -> str: ...

        @property
        def env(self) -> dict[str, str]: ...

    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient(
                secured(
                    {
                        "bootstrap.servers": self.internal_bootstrap,
                        "log_level": 0,
                        "socket.timeout.ms": 5000,
                    }
                )
            )
        return self._admin

    def ensure_topic(
        self,
        topic: str,
        partitions: int,
        replication: int | None = None,
        config: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Create ``topic`` (idempotently) and wait until every partition has a leader and
        a full ISR. ``replication`` None: the brokers' ``default.replication.factor`` (the
        run's ``--replication-factor``); without ``min.insync.replicas`` in ``config`` the
        topic takes the brokers' (``--min-insync-replicas``)."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import NewTopic

        if replication is None:
            replication = int(self.settings["default.replication.factor"])
        admin = self.admin()
        futures = admin.create_topics(
            [NewTopic(topic, partitions, replication, config=config or {})],
            request_timeout=timeout,
        )
        try:
            futures[topic].result(timeout=timeout)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise HarnessError(f"creating topic {topic} failed: {exc}") from None

        self._wait_led(topic, partitions, replication, timeout)

    def _wait_led(self, topic: str, partitions: int, replication: int, timeout: float) -> None:
        """Wait until ``topic`` has ``partitions`` partitions, each with a leader and a full
        ISR."""
        admin = self.admin()

        def all_led() -> bool:
            t = admin.list_topics(topic=topic, timeout=5).topics.get(topic)
            return (
                t is not None
                and t.error is None
                and len(t.partitions) == partitions
                and all(p.leader >= 0 and len(p.isrs) == replication for p in t.partitions.values())
            )

        wait_for(all_led, timeout=timeout, what=f"leaders and full ISR for {topic}")

    def partition_count(self, topic: str) -> int:
        """How many partitions ``topic`` has now (the brokers' metadata)."""
        md = self.admin().list_topics(topic=topic, timeout=10)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            raise HarnessError(f"no metadata for topic {topic}: {None if t is None else t.error}")
        return len(t.partitions)

    def add_partitions(self, topic: str, total: int, timeout: float = 60.0) -> None:
        """Grow ``topic`` to ``total`` partitions (``createPartitions``) and wait until
        every partition has a leader and a full ISR, as :meth:`ensure_topic` does."""
        from confluent_kafka.admin import NewPartitions

        admin = self.admin()
        futures = admin.create_partitions([NewPartitions(topic, total)], request_timeout=timeout)
        try:
            futures[topic].result(timeout=timeout)
        except Exception as exc:
            raise HarnessError(f"adding partitions to {topic} failed: {exc}") from None
        self._wait_led(topic, total, int(self.settings["default.replication.factor"]), timeout)

    def set_topic_config(self, topic: str, key: str, value: str | None) -> None:
        """Set one of ``topic``'s settings, or delete it (None: the brokers' default), with
        ``incrementalAlterConfigs``."""
        from confluent_kafka.admin import (
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            ResourceType,
        )

        op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
        entry = ConfigEntry(key, value or "", incremental_operation=op)
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
        futures = self.admin().incremental_alter_configs([resource], request_timeout=30)
        try:
            for future in futures.values():
                future.result(timeout=30)
        except Exception as exc:
            raise HarnessError(f"setting {key} of topic {topic} failed: {exc}") from None

    def replicas(self, topic: str, partition: int) -> list[int]:
        """The partition's replicas, preferred leader first (the brokers' metadata)."""
        t = self.admin().list_topics(topic=topic, timeout=10).topics.get(topic)
        if t is None or t.error is not None or partition not in t.partitions:
            raise HarnessError(f"no metadata for {topic}-{partition}")
        return list(t.partitions[partition].replicas)

    def reassign(self, topic: str, moves: dict[int, list[int]], timeout: float = 60.0) -> None:
        """Move each partition of ``moves`` to its replicas with Kafka's own reassignment
        tool and wait until they are its replicas, all in sync."""
        plan = {
            "version": 1,
            "partitions": [
                {"topic": topic, "partition": p, "replicas": r} for p, r in sorted(moves.items())
            ],
        }
        with tempfile.TemporaryDirectory(prefix="kafka-harness-reassign-") as tmp:
            path = Path(tmp) / "plan.json"
            path.write_text(json.dumps(plan))
            self.run_tool(
                "ReassignPartitionsCommand",
                "--bootstrap-server",
                self.internal_bootstrap,
                "--reassignment-json-file",
                str(path),
                "--execute",
            )
        admin = self.admin()

        def moved() -> bool:
            t = admin.list_topics(topic=topic, timeout=5).topics.get(topic)
            return t is not None and all(
                p in t.partitions
                and list(t.partitions[p].replicas) == r
                and sorted(t.partitions[p].isrs) == sorted(r)
                for p, r in moves.items()
            )

        wait_for(moved, timeout=timeout, what=f"{topic} partitions moved to {moves}")

    def tool_command(
        self, simple_name: str, jvm_opts: tuple[str, ...] = tools.TOOL_JVM_OPTS
    ) -> list[str]:
        """The command line that starts one of Kafka's tools from this cluster's jars."""
        if self.install is None:
            raise HarnessError(f"this cluster has no Kafka installation to run {simple_name}")
        return tools.tool_command(self.install, simple_name, jvm_opts)

    def java_client_command(
        self, main_class: str, jvm_opts: tuple[str, ...] = tools.TOOL_JVM_OPTS
    ) -> list[str]:
        """The command line that starts one of the project's Java clients (built on first use
        against this cluster's Kafka jars; see ``harness.kafka.javaclients``)."""
        if self.install is None:
            raise HarnessError(f"this cluster has no Kafka installation to run {main_class}")
        log_option = tools.tools_log_option(self.install)
        return javaclients.java_command(self.install, main_class, jvm_opts, log_option)

    def java_app_command(
        self, app: JavaApp, jvm_opts: tuple[str, ...] = tools.TOOL_JVM_OPTS
    ) -> list[str]:
        """The command line that starts one instance of a workload's own Java application
        (built on first use against this cluster's Kafka version; see
        ``harness.kafka.javaapps``)."""
        if self.install is None:
            raise HarnessError(f"this cluster has no Kafka installation to run {app.name}")
        from harness.kafka import javaapps

        log_option = tools.tools_log_option(self.install)
        return javaapps.java_command(self.install, app, jvm_opts, log_option)

    def run_tool(self, simple_name: str, *args: str, timeout: float = 60.0) -> str:
        """Run one of Kafka's own tools against this cluster; its stdout. A tool given
        ``--bootstrap-server`` of a secured cluster gets the harness's ``--command-config``
        right after it."""
        if self.install is None:
            raise HarnessError(f"this cluster has no Kafka installation to run {simple_name}")
        argv = list(args)
        if "--bootstrap-server" in argv:
            at = argv.index("--bootstrap-server") + 1
            config = command_config(argv[at]) if at < len(argv) else None
            if config is not None:
                argv[at + 1 : at + 1] = ["--command-config", config]
        return tools.run_tool(self.install, self.env, simple_name, *argv, timeout=timeout)
