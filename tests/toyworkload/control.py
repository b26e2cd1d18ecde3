"""The toy workload as faults see it: its sender runs inside the harness's own process, so
there is no client process to pause, kill or cut; faults aimed at clients find none."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from history.clientcontrol import StateKey


@dataclass
class ToyClients:
    bootstrap: str
    group_id: str
    input_topic: str
    output_topic: str
    session_timeout_s: float = 10.0
    transaction_timeout_s: float = 10.0
    pause_at_commit: bool = False
    hooks: bool = False
    crash_interval_s: float | None = None
    processor_roles: tuple[str, ...] = ()

    def processor_pids(self) -> dict[int, int]:
        return {}

    def processor_gids(self) -> dict[int, int]:
        return {}

    def state_keys(self) -> tuple[StateKey, ...]:
        return ()

    def aim_processor(self, role: str, pick: int) -> tuple[int, str] | None:
        return None

    def processor_ready(self, instance: int) -> bool:
        return False

    def transactional_ids(self) -> dict[int, str]:
        return {}

    def arm_hook(self, instance: int, at: str, action: str, delay_ms: int = 0) -> None:
        raise NotImplementedError("the toy workload has no hook points")

    def fired_hook(self, instance: int) -> dict[str, Any] | None:
        return None
