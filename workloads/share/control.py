"""The share members as faults see them (``history.clientcontrol.ClientControl``): processes
that may be paused past their record locks, killed with records acquired, cut off from every
broker or aimed at by group id; no hook points, no transactional ids of their own (a member
writes its output with an idempotent producer, not a transaction)."""

from __future__ import annotations

from workloads.control import SupervisedControl
from workloads.share.supervisor import ShareWorkload


class ShareClients(SupervisedControl):
    """The members of one share run (the group: the share group)."""

    def __init__(self, workload: ShareWorkload) -> None:
        super().__init__(workload, workload.cluster.bootstrap, workload.options)
