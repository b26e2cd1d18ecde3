"""The Streams application's instances as faults see them
(``history.clientcontrol.ClientControl``): processors without hook points or a commit-time
pause, whose crashes are spaced for JVMs that restore state before they work again."""

from __future__ import annotations

from workloads.control import SupervisedControl
from workloads.streams.supervisor import StreamsWorkload


class StreamsClients(SupervisedControl):
    """The instances of one streams run (``transactional_ids``: each one's first thread
    producer, from its own history)."""

    #: An instance JVM starts, restores its state and rejoins in several seconds; kills
    #: every 8 s would keep the group rebalancing for good.
    crash_interval_s = 20.0

    def __init__(self, workload: StreamsWorkload) -> None:
        super().__init__(workload, workload.cluster.bootstrap, workload.options)
