"""One client process off the network by its group id (root iptables, owner match): the
``nemeses.control.ClientCuts`` ability."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

from common.errors import HarnessError
from harness.substrate import runstate
from harness.substrate.abilities.nodes import host_port

if TYPE_CHECKING:
    from harness.substrate.runstate import Slot


def can_cut_clients() -> bool:
    """Root and iptables: client processes can get group ids and be cut by them."""
    return os.geteuid() == 0 and bool(shutil.which("iptables"))


class GroupClientCuts:
    """Client processes spawned with a group id of their supervisor slot's, cut by it."""

    slot: Slot | None

    if TYPE_CHECKING:  # the backend's

        @property
        def bootstrap(self) -> str: ...

    def client_gid(self, slot: int) -> int | None:
        """The group id the children of a workload supervisor's ``slot`` run with, so that
        :meth:`cut_client` can cut exactly them; None (spawn as usual, uncuttable) without
        root and iptables, without a host slot (the Docker backend) or beyond the slot's
        block of ``runstate.CLIENT_GIDS_PER_SLOT`` ids."""
        if self.slot is None or not can_cut_clients():
            return None
        return runstate.client_gid(self.slot.number, slot)

    def _client_slot(self) -> int:
        if self.slot is None:
            raise HarnessError("client cuts need a host slot (the process backend)")
        if not can_cut_clients():
            raise HarnessError("client cuts need root and iptables")
        return self.slot.number

    def cut_client(self, gid: int) -> None:
        """Drop every packet that a process of group ``gid`` sends, inbound connections'
        answers included: an OUTPUT rule in the root namespace, tagged with the slot (so
        ``heal_all`` and the reaper find it), verified in ``iptables -S OUTPUT``."""
        number = self._client_slot()
        rule = runstate.client_rule(number, gid)
        proc = subprocess.run(
            ["iptables", "-w", "-I", *rule], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise HarnessError(f"cutting client gid {gid} failed: {proc.stderr.strip()}")
        if rule not in self.client_cuts():
            raise HarnessError(f"the cut of client gid {gid} is not in iptables -S OUTPUT")

    def heal_client(self, gid: int) -> None:
        """Remove every cut of group ``gid`` (a rule added twice is removed twice), verified."""
        number = self._client_slot()
        runstate.remove_client_rules(number, gid)
        if runstate.client_rule(number, gid) in self.client_cuts():
            raise HarnessError(f"the cut of client gid {gid} is still in iptables -S OUTPUT")

    def client_cuts(self) -> list[list[str]]:
        """This cluster's client-cut rules now (as ``iptables -S OUTPUT`` lists them, without
        ``-A``)."""
        if self.slot is None or not can_cut_clients():
            return []
        return [rule for n, rule in runstate.client_rules() if n == self.slot.number]

    def client_reaches(self, gid: int, timeout: float = 2.0) -> bool:
        """Probe: does a process of group ``gid`` get a TCP connection to the first broker's
        client address? An answer of any kind counts, a refusal included (a proxy that is
        down refuses); a cut one gets EPERM from its own kernel, or no answer at all."""
        host, port = host_port(self.bootstrap.split(",")[0])
        code = (
            "import socket,sys\n"
            f"s=socket.socket();s.settimeout({timeout})\n"
            "try:\n"
            f"    s.connect(({host!r},{port}))\n"
            "except ConnectionRefusedError:\n"
            "    pass\n"
            "except OSError:\n"
            "    sys.exit(1)\n"
        )
        try:
            proc = subprocess.run(
                [sys.executable, "-c", code],
                group=gid,
                capture_output=True,
                check=False,
                timeout=timeout + 30,
            )
        except subprocess.TimeoutExpired:
            return False
        return proc.returncode == 0

    def _heal_clients(self) -> None:
        if self.slot is not None and can_cut_clients():
            runstate.remove_client_rules(self.slot.number)
