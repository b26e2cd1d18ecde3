"""The eos processors as faults see them (``history.clientcontrol.ClientControl``).

What a processor can do besides being paused, killed and cut off is its client's manifest's
to say: Kafka's copier has no protocol hooks, and SIGUSR1 (the zombie's "stop at your next
offset commit") would kill its JVM.
"""

from __future__ import annotations

from typing import Any

from workloads.control import SupervisedControl
from workloads.eos.supervisor import EosWorkload


class EosClients(SupervisedControl):
    """The processors of one eos run: hook points and a commit-time pause as the client's
    manifest allows."""

    def __init__(self, workload: EosWorkload) -> None:
        super().__init__(workload, workload.cluster.bootstrap, workload.options)
        self.workload = workload
        abilities = workload.manifest.abilities
        self.pause_at_commit = abilities.zombie
        self.hooks = abilities.hooks

    def arm_hook(self, instance: int, at: str, action: str, delay_ms: int = 0) -> None:
        self.workload.arm_hook(instance, at, action, delay_ms)

    def fired_hook(self, instance: int) -> dict[str, Any] | None:
        return self.workload.fired_hook(instance)
