"""The Connect workers as faults see them (``history.clientcontrol.ClientControl``).

A worker is the "processor" that pause, zombie, kill, crash and cut faults act on; unlike an
eos processor it is not interchangeable with the others: processor faults may aim at the
group's leader or at the worker running a given task (``nemeses.targets``), and a rolling
restart waits for each successor's REST API before it stops the next worker.
"""

from __future__ import annotations

from workloads.connect.supervisor import ConnectWorkload
from workloads.control import SupervisedControl

#: What processor faults aim at besides a random worker: the group leader, which assigns
#: the tasks and fences zombie task producers before a round of new ones starts (KIP-618),
#: and the worker that runs a given task.
ROLES = ("leader", "task-worker")


class ConnectClients(SupervisedControl):
    """The workers of one connect run: ``group_id`` is Connect's group, the input topic its
    offsets topic, the output its data topic; no hook points, no commit-time pause."""

    processor_roles = ROLES
    #: Seconds between two crash-clients kills: a worker JVM takes about ten seconds to
    #: start and rejoin, so the schedule's own spacing would leave the group rebalancing
    #: for good and the load would never run.
    crash_interval_s = 30.0

    def __init__(self, workload: ConnectWorkload) -> None:
        o = workload.options
        super().__init__(
            workload,
            workload.cluster.bootstrap,
            o,
            input_topic=o.offsets_topic,
            output_topic=o.data_topic,
        )
        self.workload = workload

    def aim_processor(self, role: str, pick: int) -> tuple[int, str] | None:
        return self.workload.worker_in(role, pick)

    def processor_ready(self, instance: int) -> bool:
        return self.workload.serving(instance)
