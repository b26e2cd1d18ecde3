"""The Java twins of the workloads' client processes, as the supervisors start them.

The sources are in ``workloads/java/src`` (package ``kafkaharness``): ``EosProcessor`` writes
the history of ``workloads.eos.processor`` and ``QueueClient`` that of
``workloads.queue.client``, each reading the same ``--config`` JSON. The harness compiles them
against the cluster's Kafka version (``ClusterAccess.java_client_command``); this module only
names them and says how their JVMs are started. Why a Java client at all: librdkafka does not
speak KIP-890's transaction version 2, and Kafka's own copier records no history op by op.
"""

from __future__ import annotations

from typing import Final

#: ``--client`` values of the workloads with a Java twin (the eos workload adds ``copier``).
CLIENTS: Final = ("python", "java")

EOS_PROCESSOR: Final = "kafkaharness.EosProcessor"
QUEUE_CLIENT: Final = "kafkaharness.QueueClient"

#: A small heap, one GC thread, C1 only: start-up time and memory matter more on 2 cores than
#: peak speed (as for Kafka's copier).
JVM_OPTS: Final = ("-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
