"""How the JVMs of the workloads' client processes are started.

The project's Java clients (``workloads/java/src``, package ``kafkaharness``: ``EosProcessor``
writes the history of ``workloads.eos.processor`` and ``QueueClient`` that of
``workloads.queue.client``) are a manifest's ``kafka-java`` build, compiled against the
cluster's Kafka version (``ClusterAccess.java_client_command``); their classes are named by
``workloads/manifests/java.toml``. Kafka's own copier and the workloads' Java applications run
in JVMs sized the same way. Why a Java client at all: librdkafka does not speak KIP-890's
transaction version 2, and Kafka's own copier records no history op by op.
"""

from __future__ import annotations

from typing import Final

#: A small heap, one GC thread, C1 only: start-up time and memory matter more on 2 cores than
#: peak speed (as for Kafka's copier). The one definition: every JVM of a workload starts so.
JVM_OPTS: Final = ("-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
