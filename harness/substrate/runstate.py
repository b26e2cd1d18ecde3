"""Run slots, run markers and the reaper that cleans up after a harness that died.

Each live cluster holds one *slot*: an integer that fixes its subnet, bridge, namespace and
veth names and its toxiproxy ports, so clusters side by side (one per pytest-xdist worker)
never collide. A slot is held by an exclusive ``flock`` on ``<state>/slots/<n>.lock`` for
the life of the harness process; the kernel drops the lock when that process dies, however
it dies (even SIGKILL). So "the lock can be taken but the slot's state file is still there"
means "a harness died here", and the next start reaps what it left.

Every process the harness spawns carries ``KAFKA_HARNESS_RUN=<run id>`` in its environment.
The reaper kills processes by that marker, never by a broad process-name match.

A slot also owns a block of group ids for the client processes of its cluster's workloads
(:func:`client_gid`): as root each supervisor slot's children run with a group id of their
own, so a fault can cut exactly one client process off the network with an iptables rule in
the root namespace (``-m owner --gid-owner``) tagged ``kafka-harness-slot-<n>-client``. The
reaper finds those rules by their tag, so none outlives a run that died.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from common.errors import HarnessError
from common.procfs import process_state

MARKER_ENV = "KAFKA_HARNESS_RUN"
MAX_SLOTS = 64
#: Client group ids: ``CLIENT_GID_BASE + cluster slot * CLIENT_GIDS_PER_SLOT + client slot``.
#: The block of a slot is its cluster's while the slot lock is held, so no two live runs on
#: the machine share a group id.
CLIENT_GID_BASE = 1_000_000
CLIENT_GIDS_PER_SLOT = 64


def state_root() -> Path:
    """Where slot locks and state live: tmpfs under /run for root, else a per-user dir."""
    env = os.environ.get("KAFKA_HARNESS_STATE")
    if env:
        return Path(env)
    if os.geteuid() == 0:
        return Path("/run/kafka-harness")
    return Path(f"/tmp/kafka-harness-{os.getuid()}")


def new_run_id() -> str:
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"


@dataclass
class SlotState:
    """What a run created (or is about to create) in its slot, written before creating it."""

    slot: int
    run_id: str
    pid: int
    netns: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    root_iptables: list[list[str]] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)


class Slot:
    """A held slot; ``release()`` (or process death) frees it."""

    def __init__(self, number: int, fd: int, run_id: str) -> None:
        self.number = number
        self._fd = fd
        self.run_id = run_id
        self.state = SlotState(slot=number, run_id=run_id, pid=os.getpid())
        self.save()

    @property
    def state_path(self) -> Path:
        return state_root() / "slots" / f"{self.number}.json"

    def save(self) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self.state)))
        tmp.replace(self.state_path)

    def release(self) -> None:
        """Forget the state (everything in it has been cleaned) and drop the lock."""
        with contextlib.suppress(FileNotFoundError):
            self.state_path.unlink()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _try_lock(number: int) -> int | None:
    path = state_root() / "slots" / f"{number}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def acquire_slot(run_id: str, wanted: int | None = None, usable=None) -> Slot:
    """Take slot ``wanted`` (or the first free one that ``usable(n)`` accepts).

    Reaps whatever a dead run left in the slot before handing it out.
    """
    candidates = [wanted] if wanted is not None else range(MAX_SLOTS)
    for n in candidates:
        fd = _try_lock(n)
        if fd is None:
            continue
        reap_slot(n)
        if usable is not None and not usable(n):
            os.close(fd)
            continue
        return Slot(n, fd, run_id)
    if wanted is not None:
        raise HarnessError(f"slot {wanted} is held by another live harness run")
    raise HarnessError(f"all {MAX_SLOTS} harness slots are busy or unusable")


def _read_state(number: int) -> SlotState | None:
    path = state_root() / "slots" / f"{number}.json"
    try:
        return SlotState(**json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError):
        # A state file torn by a crash mid-write: names are derivable from the slot anyway.
        return SlotState(slot=number, run_id="", pid=0)


def live_run_ids() -> set[str]:
    """Run ids whose slot lock is still held by a live harness process."""
    live = set()
    slots = state_root() / "slots"
    if not slots.exists():
        return live
    for path in slots.glob("*.json"):
        number = int(path.stem)
        fd = _try_lock(number)
        if fd is None:
            st = _read_state(number)
            if st:
                live.add(st.run_id)
        else:
            os.close(fd)
    return live


def marked_processes() -> dict[int, str]:
    """pid -> run id of every process carrying the harness marker."""
    found: dict[int, str] = {}
    needle = f"{MARKER_ENV}=".encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        if needle not in env:
            continue
        for item in env.split(b"\0"):
            if item.startswith(needle):
                found[int(entry.name)] = item[len(needle) :].decode(errors="replace")
                break
    return found


def kill_run_processes(run_ids: set[str] | None = None, keep: set[str] | None = None) -> list[int]:
    """SIGKILL marked processes of ``run_ids`` (or of every run not in ``keep``).

    A stopped (SIGSTOPped) process dies from SIGKILL as well; SIGCONT is sent too so that
    nothing lingers in state T if the kill is somehow refused.
    """
    killed = []
    me = os.getpid()
    for pid, rid in marked_processes().items():
        if pid == me:
            continue
        if (run_ids is not None and rid in run_ids) or (
            run_ids is None and keep is not None and rid not in keep
        ):
            for sig in (signal.SIGKILL, signal.SIGCONT):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            killed.append(pid)
    for pid in killed:
        _wait_gone(pid)
    return killed


def _wait_gone(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = process_state(pid)
        if state is None:
            return
        if state == "Z":
            # A zombie of ours is reaped by waitpid; of a dead parent, by init.
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        time.sleep(0.02)


def slot_names(number: int, nodes: int = 16) -> tuple[list[str], list[str]]:
    """Deterministic namespace and link names of a slot (so reaping needs no state file)."""
    netns = [f"kh{number}n{i}" for i in range(1, nodes + 1)]
    links = [f"kh{number}br"] + [f"kh{number}v{i}" for i in range(1, nodes + 1)]
    return netns, links


def _run_quiet(cmd: list[str]) -> None:
    subprocess.run(cmd, capture_output=True, check=False)


def remove_network(netns: list[str], links: list[str], root_iptables: list[list[str]]) -> None:
    """Delete namespaces (their iptables rules go with them), links and root-ns rules."""
    existing_ns = set(_list_netns())
    for ns in netns:
        if ns in existing_ns:
            _run_quiet(["ip", "netns", "del", ns])
    existing_links = set(_list_links())
    for link in links:
        if link in existing_links:
            _run_quiet(["ip", "link", "del", link])
    for rule in root_iptables:
        # Delete every copy of the rule that may have been added.
        for _ in range(8):
            proc = subprocess.run(["iptables", "-D", *rule], capture_output=True, check=False)
            if proc.returncode != 0:
                break


def _list_netns() -> list[str]:
    proc = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]


def _list_links() -> list[str]:
    proc = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=False)
    names = []
    for line in proc.stdout.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@")[0])
    return names


# --- client cuts: root-namespace OUTPUT rules matching one client's group id -----------


def client_gid(number: int, client_slot: int) -> int | None:
    """The group id of client slot ``client_slot`` of the cluster in slot ``number``; None
    beyond the slot's block."""
    if not (0 <= number < MAX_SLOTS and 0 <= client_slot < CLIENT_GIDS_PER_SLOT):
        return None
    return CLIENT_GID_BASE + number * CLIENT_GIDS_PER_SLOT + client_slot


def client_tag(number: int) -> str:
    """The comment that marks slot ``number``'s client-cut rules."""
    return f"kafka-harness-slot-{number}-client"


def client_rule(number: int, gid: int) -> list[str]:
    """The OUTPUT rule that drops every packet of group ``gid`` (without ``-A``/``-I``), in
    the order ``iptables -S`` prints it."""
    return [
        "OUTPUT",
        *("-m", "owner", "--gid-owner", str(gid)),
        *("-m", "comment", "--comment", client_tag(number)),
        *("-j", "DROP"),
    ]


def _iptables(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["iptables", "-w", *args], capture_output=True, text=True, check=False)


def output_rules() -> str:
    """``iptables -S OUTPUT`` of the root namespace (empty when it cannot be read)."""
    return _iptables("-S", "OUTPUT").stdout


def client_rules(listing: str | None = None) -> list[tuple[int, list[str]]]:
    """(slot, rule) of every client-cut rule in the root OUTPUT chain; ``listing`` is an
    ``iptables -S OUTPUT`` output (read now when None). A rule is given without ``-A``."""
    found = []
    for line in (output_rules() if listing is None else listing).splitlines():
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        if words[:2] != ["-A", "OUTPUT"] or "--comment" not in words:
            continue
        comment = words[words.index("--comment") + 1 :][:1]
        if not comment:
            continue
        head, sep, tail = comment[0].rpartition("-client")
        prefix = "kafka-harness-slot-"
        if sep and not tail and head.startswith(prefix) and head[len(prefix) :].isdigit():
            found.append((int(head[len(prefix) :]), words[1:]))
    return found


def remove_client_rules(
    number: int, gid: int | None = None, listing: str | None = None
) -> list[list[str]]:
    """Delete slot ``number``'s client-cut rules (only group ``gid``'s when given); the
    rules deleted."""
    removed = []
    for slot, rule in client_rules(listing):
        if slot != number or (gid is not None and not _matches_gid(rule, gid)):
            continue
        if _iptables("-D", *rule).returncode == 0:
            removed.append(rule)
    return removed


def _matches_gid(rule: list[str], gid: int) -> bool:
    return "--gid-owner" in rule and rule[rule.index("--gid-owner") + 1 :][:1] == [str(gid)]


def reap_slot(number: int, listing: str | None = None) -> bool:
    """Clean up after a dead run in ``number`` (caller holds the slot lock). True if it did.

    ``listing``: the root OUTPUT chain as ``iptables -S`` printed it (read now when None).
    """
    st = _read_state(number)
    netns, links = slot_names(number)
    root = os.geteuid() == 0
    leftovers_ns = [n for n in _list_netns() if n in netns] if root else []
    if root:
        listing = output_rules() if listing is None else listing
        cuts = [rule for slot, rule in client_rules(listing) if slot == number]
    else:
        cuts = []
    if st is None and not leftovers_ns and not cuts:
        return False
    if st is not None and st.run_id:
        kill_run_processes({st.run_id})
    if root:
        rules = st.root_iptables if st else []
        remove_network(sorted(set(netns) | set(st.netns if st else [])), links, rules)
        for rule in cuts:
            _iptables("-D", *rule)
    for d in st.dirs if st else []:
        shutil.rmtree(d, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        (state_root() / "slots" / f"{number}.json").unlink()
    return True


def reap_all() -> dict[str, int]:
    """Reap every dead slot and any marked process whose run is not live.

    A client-cut rule whose slot has no lock file (the state directory was wiped) is a dead
    slot's too: its slot is locked and reaped like the others.
    """
    reaped = 0
    slots = state_root() / "slots"
    listing = output_rules() if os.geteuid() == 0 else ""
    numbers = {int(path.stem) for path in slots.glob("*.lock")} if slots.exists() else set()
    numbers |= {slot for slot, _rule in client_rules(listing) if 0 <= slot < MAX_SLOTS}
    for number in sorted(numbers):
        fd = _try_lock(number)
        if fd is None:
            continue
        try:
            reaped += reap_slot(number, listing)
        finally:
            os.close(fd)
    orphans = kill_run_processes(keep=live_run_ids())
    return {"slots": reaped, "processes": len(orphans)}
