"""The share members as faults see them (``history.clientcontrol.ClientControl``): processes
that may be paused past their record locks, killed with records acquired, cut off from every
broker or aimed at by group id, and armed to act on themselves at a moment of a round (after
their writes, before or during their acknowledgements' commit, after it); no transactional
ids of their own (a member writes its output with an idempotent producer, not a
transaction)."""

from __future__ import annotations

from typing import Any

from workloads.control import SupervisedControl
from workloads.share.supervisor import ShareWorkload


class ShareClients(SupervisedControl):
    """The members of one share run (the group: the share group)."""

    hooks = True

    def __init__(self, workload: ShareWorkload) -> None:
        super().__init__(workload, workload.cluster.bootstrap, workload.options)
        self.workload = workload

    def arm_hook(self, instance: int, at: str, action: str, delay_ms: int = 0) -> None:
        self.workload.arm_hook(instance, at, action, delay_ms)

    def fired_hook(self, instance: int) -> dict[str, Any] | None:
        return self.workload.fired_hook(instance)
