"""What every workload's fault-facing client object shares (``history.clientcontrol``).

Each workload package's ``control`` module holds the object its driver hands the faults; they
all stand on :class:`SupervisedControl`: a supervisor's live processes (pids, group ids,
transactional ids) and the names faults aim at, with every ability a workload may lack
answered "none" (no commit-time pause, no hook points, no roles, the schedule's own crash
spacing, no group state beyond the group coordinator's). A package's class overrides what
its processes can do; the protocol's test holds each of them to every member.
"""

from __future__ import annotations

from typing import Any

from common.errors import HarnessError
from history.clientcontrol import StateKey
from workloads.processes import Supervisor


class SupervisedControl:
    """A supervisor's processes as faults see them (satisfies ``ClientControl``).

    ``options`` gives the timeouts (``session_timeout_ms``, ``transaction_timeout_ms``) and,
    unless named here, the group and the topics (``group_id``, ``input_topic``,
    ``output_topic``).
    """

    pause_at_commit: bool = False
    hooks: bool = False
    crash_interval_s: float | None = None
    processor_roles: tuple[str, ...] = ()

    def __init__(
        self,
        supervisor: Supervisor,
        bootstrap: str,
        options: Any,
        *,
        group_id: str | None = None,
        input_topic: str | None = None,
        output_topic: str | None = None,
    ) -> None:
        self.supervisor = supervisor
        self.bootstrap = bootstrap
        self.group_id: str = options.group_id if group_id is None else group_id
        self.input_topic: str = options.input_topic if input_topic is None else input_topic
        self.output_topic: str = options.output_topic if output_topic is None else output_topic
        self.session_timeout_s: float = options.session_timeout_ms / 1000
        self.transaction_timeout_s: float = options.transaction_timeout_ms / 1000

    def processor_pids(self) -> dict[int, int]:
        return self.supervisor.processor_pids()

    def processor_gids(self) -> dict[int, int]:
        return self.supervisor.processor_gids()

    def transactional_ids(self) -> dict[int, str]:
        return self.supervisor.transactional_ids()

    def state_keys(self) -> tuple[StateKey, ...]:
        """None: a consumer group's state is all on its group coordinator (a share group's
        is not: ``workloads.share.control``)."""
        return ()

    def aim_processor(self, role: str, pick: int) -> tuple[int, str] | None:
        """No roles: every process is as good a target as another."""
        return None

    def processor_ready(self, instance: int) -> bool:
        """Serving as soon as it runs (nothing more to ask of it)."""
        return instance in self.supervisor.processor_pids()

    def arm_hook(self, instance: int, at: str, action: str, delay_ms: int = 0) -> None:
        raise HarnessError(f"{type(self).__name__}: these processes have no protocol hook points")

    def fired_hook(self, instance: int) -> dict[str, Any] | None:
        return None
