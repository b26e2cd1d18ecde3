"""What the kernel says about a process, read from ``/proc/<pid>/stat``.

Pauses are verified by the process state (``T`` = stopped), reaping tells a reused pid apart
by its start time. The command name in ``stat`` may hold spaces and parentheses, so fields
are counted after the last ``") "``.
"""

from __future__ import annotations


def stat_fields(pid: int) -> list[str] | None:
    """The fields after the command name (state first), or None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            text = fh.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    _, sep, rest = text.rpartition(") ")
    return rest.split() if sep else None


def process_state(pid: int) -> str | None:
    """The kernel's one-letter state of ``pid`` (``T`` = stopped, ``Z`` = zombie), None if gone."""
    fields = stat_fields(pid)
    return fields[0][0] if fields else None


def process_start(pid: int) -> str | None:
    """Field 22 of ``stat`` (start time in clock ticks since boot), None if gone."""
    fields = stat_fields(pid)
    return fields[19] if fields and len(fields) > 19 else None


def catches_signal(pid: int, signum: int) -> bool:
    """Whether ``pid`` has a handler for ``signum`` (``SigCgt`` in ``/proc/<pid>/status``).

    A signal whose default action ends the process must not reach one that has not yet
    installed its handler (a processor still starting).
    """
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    return False
