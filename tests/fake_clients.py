"""A fault-facing client object for unit tests: every member of
``history.clientcontrol.ClientControl`` answered "none" (no processes, no hooks, no roles),
so a fake overrides only what its test exercises and still conforms in full
(``tests/test_client_control.py`` holds every fake to the protocol)."""

from __future__ import annotations

from typing import Any

from history.clientcontrol import StateKey


class NoClients:
    """Clients with no process, no hook point, no role, no state beyond the group
    coordinator's: the protocol's "none" answers."""

    bootstrap = "localhost:1"
    group_id = "g"
    input_topic = "in"
    output_topic = "out"
    session_timeout_s = 10.0
    transaction_timeout_s = 10.0
    pause_at_commit = False
    hooks = False
    crash_interval_s: float | None = None
    processor_roles: tuple[str, ...] = ()

    def processor_pids(self) -> dict[int, int]:
        return {}

    def processor_gids(self) -> dict[int, int]:
        return {}

    def transactional_ids(self) -> dict[int, str]:
        return {}

    def state_keys(self) -> tuple[StateKey, ...]:
        return ()

    def aim_processor(self, role: str, pick: int) -> tuple[int, str] | None:
        return None

    def processor_ready(self, instance: int) -> bool:
        return instance in self.processor_pids()

    def arm_hook(self, instance: int, at: str, action: str, delay_ms: int = 0) -> None:
        raise RuntimeError("these fake clients have no hook points")

    def fired_hook(self, instance: int) -> dict[str, Any] | None:
        return None
