"""The queue's client processes as faults see them (``history.clientcontrol.ClientControl``):
processors that may be paused, killed, cut off and impersonated, without hook points or a
commit-time pause; input and output are the one queue topic."""

from __future__ import annotations

from workloads.control import SupervisedControl
from workloads.queue.supervisor import QueueWorkload


class QueueClients(SupervisedControl):
    """The client processes of one queue run (the group: the consumers' effective one)."""

    def __init__(self, workload: QueueWorkload) -> None:
        o = workload.options
        super().__init__(
            workload,
            workload.cluster.bootstrap,
            o,
            group_id=o.effective_group_id,
            input_topic=o.topic,
            output_topic=o.topic,
        )
