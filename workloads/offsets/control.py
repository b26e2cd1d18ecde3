"""The committers as faults see them (``history.clientcontrol.ClientControl``): processes
that may be paused, killed or cut off, with no transactions and no hook points; their group
state is every committer's group on ``__consumer_offsets``, so a fault aimed at the groups'
coordinators can find the broker that coordinates most of them."""

from __future__ import annotations

from history.clientcontrol import StateKey
from workloads.control import SupervisedControl
from workloads.offsets.supervisor import OffsetsWorkload

#: The group coordinators' log.
OFFSETS_TOPIC = "__consumer_offsets"


class OffsetsClients(SupervisedControl):
    """The committers of one offsets run (the group: the first committer's)."""

    def __init__(self, workload: OffsetsWorkload) -> None:
        super().__init__(
            workload, workload.cluster.bootstrap, workload.options, group_id=workload.group_ids[0]
        )
        self.workload = workload

    def state_keys(self) -> tuple[StateKey, ...]:
        """Each committer's group after the first (the first is ``group_id``'s)."""
        return tuple(
            StateKey(OFFSETS_TOPIC, g, "group coordinator", g) for g in self.workload.group_ids[1:]
        )
