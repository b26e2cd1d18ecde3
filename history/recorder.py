"""Per-process history writer.

The recorder sits on the hot path of every workload operation and its cost is budgeted (<= 5% of
a Kafka pipeline), so the per-op path is: read two clocks, build one dict, encode it with a
pre-built C encoder, and hand the bytes to the kernel with a single ``write(2)`` on an
``O_APPEND`` descriptor. There is no user-space buffer, so "flushed per operation" holds without
a separate flush call, and a crash can tear at most the line being written. There is no fsync:
the harness guards against its own crashes, not against power loss of the test machine.
"""

from __future__ import annotations

import os
import socket
import time
import weakref
from collections.abc import Mapping
from os import write as _os_write
from pathlib import Path
from time import monotonic_ns, time_ns
from typing import Any, Final, NoReturn, Self, cast

from history.schema import (
    FORMAT_VERSION,
    KIND_PROCESS,
    OP_TYPES,
    VERSION_KEY,
    Header,
    Op,
    OpType,
    Process,
    encode_json,
    is_process_id,
)

_OPEN_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC

_CLOSED: Final = -1
_FORKED: Final = -2

# Recorders alive in this process, so a fork can disarm them in the child (see _disarm_in_child).
_live: weakref.WeakSet[Recorder] = weakref.WeakSet()


def boot_id() -> str | None:
    """Identity of the running kernel boot: monotonic clocks are only comparable within one boot
    (one machine, containers included), so merge uses this to refuse meaningless orderings."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def wall_now() -> str:
    """ISO-8601 UTC with microseconds, the format of the ``wall`` field."""
    us = time.time_ns() // 1000
    sec, frac = divmod(us, 1_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)) + f".{frac:06d}Z"


class Recorder:
    """Append-only writer of one process's history file.

    One writer: a Recorder belongs to the single thread (and OS process) that created it, exactly
    like a Jepsen process, which performs one operation at a time. Nothing is locked, because a
    lock would cost on every op to protect a case the format forbids anyway. Several threads or
    processes need several Recorders, each with its own process id and file.

    The file is created exclusively: appending a second run to an existing file would silently
    mix two histories, so an existing path raises :class:`FileExistsError`.
    """

    __slots__ = ("__weakref__", "_fd", "_index", "_process", "_wall_prefix", "_wall_sec", "path")

    def __init__(
        self, path: str | os.PathLike[str], process: Process, meta: dict[str, Any] | None = None
    ) -> None:
        if not is_process_id(process):
            raise ValueError(f"process must be an int >= 0 or a non-empty str, not {process!r}")
        self.path = Path(path)
        self._process = process
        self._index = 0
        self._wall_sec = -1
        self._wall_prefix = ""
        self._fd = _CLOSED
        header: Header = {
            VERSION_KEY: FORMAT_VERSION,
            "kind": KIND_PROCESS,
            "process": process,
            "meta": dict(meta) if meta is not None else {},
            "clock": {
                "time": "monotonic_ns",
                "boot_id": boot_id(),
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "started_wall": wall_now(),
            },
        }
        # Encode before creating the file so an unserialisable meta leaves nothing behind.
        line = (encode_json(header) + "\n").encode()
        self._fd = os.open(self.path, _OPEN_FLAGS, 0o644)
        _live.add(self)
        self._write(line)

    @property
    def process(self) -> Process:
        return self._process

    @property
    def count(self) -> int:
        """Ops written so far, which is also the ``index`` the next op will get."""
        return self._index

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def _write(self, data: bytes) -> None:
        fd = self._fd
        if fd < 0:
            self._refuse()
        n = _os_write(fd, data)
        if n < len(data):
            self._finish_short_write(data[n:])

    def _finish_short_write(self, rest: bytes) -> None:
        # Regular-file writes are complete unless the disk fills up or a signal lands mid-write.
        # Finish the line; if that fails, stop recording, because a line appended after a torn
        # one would turn tolerated crash damage (torn last line) into a corrupt file.
        try:
            while rest:
                rest = rest[_os_write(self._fd, rest) :]
        except BaseException:
            self.close()
            raise

    def _refuse(self) -> NoReturn:
        if self._fd == _FORKED:
            raise RuntimeError(
                f"Recorder for process {self._process!r} was created in another OS process; "
                "create a new Recorder (new process id, new file) after fork"
            )
        raise ValueError(f"Recorder for {self.path} is closed")

    def _wall(self) -> str:
        # strftime is the expensive part of formatting; it only changes once per second.
        sec, frac = divmod(time_ns() // 1000, 1_000_000)
        if sec != self._wall_sec:
            self._wall_prefix = time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(sec))
            self._wall_sec = sec
        return f"{self._wall_prefix}{frac:06d}Z"

    def record(
        self,
        type: OpType,
        f: str,
        value: Any,
        error: Any = None,
        extra: Mapping[str, Any] | None = None,
    ) -> Op:
        """Write one op and return it (a fresh dict the caller may keep, e.g. to pair later).

        ``time`` is taken before encoding so it marks when the caller asked, not when the bytes
        reached the kernel. The index only advances after a successful write, so an op that
        failed to encode (say, ``bytes`` in ``value``) leaves no gap in the sequence.
        ``extra`` adds keys the format allows beside the fixed ones (additive op keys, such
        as the queue workload's ``rebalance_log``); it may not replace a fixed one.
        """
        if type not in OP_TYPES:
            raise ValueError(f"op type must be one of invoke/ok/fail/info, not {type!r}")
        if error is not None and (type == "invoke" or type == "ok"):
            raise ValueError(f"an {type!r} op cannot carry an error")
        op: Op = {
            "index": self._index,
            "time": monotonic_ns(),
            "wall": self._wall(),
            "process": self._process,
            "type": type,
            "f": f,
            "value": value,
        }
        if error is not None:
            op["error"] = error
        elif type == "fail":
            raise ValueError("a 'fail' op needs an error saying why it failed")
        if extra:
            if extra.keys() & op.keys():
                raise ValueError(f"extra keys {sorted(extra.keys() & op.keys())} are fixed keys")
            op = cast(Op, {**op, **extra})
        self._write((encode_json(op) + "\n").encode())
        self._index += 1
        return op

    def invoke(self, f: str, value: Any) -> Op:
        return self.record("invoke", f, value)

    def ok(self, f: str, value: Any) -> Op:
        return self.record("ok", f, value)

    def fail(self, f: str, value: Any, error: Any) -> Op:
        return self.record("fail", f, value, error)

    def info(self, f: str, value: Any, error: Any = None) -> Op:
        """Outcome unknown: the op may or may not have taken effect (timeouts, crashes)."""
        return self.record("info", f, value, error)

    def close(self) -> None:
        """Idempotent. In a forked child this only drops the child's copy of the descriptor."""
        fd = self._fd
        self._fd = _CLOSED
        if fd >= 0:
            os.close(fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # Descriptor hygiene only; the data is already in the kernel after every op.
        fd = getattr(self, "_fd", _CLOSED)
        if fd >= 0:
            os.close(fd)

    def __reduce__(self) -> NoReturn:
        # Shipping a Recorder to another process would give two writers one process id.
        raise TypeError("a Recorder cannot be pickled; create one in the process that uses it")

    def __repr__(self) -> str:
        state = "closed" if self._fd < 0 else "open"
        return f"Recorder({str(self.path)!r}, {self._process!r}, ops={self._index}, {state})"


def _disarm_in_child() -> None:
    """After fork the child shares the parent's descriptors; a write from the child would land in
    the parent's file under the parent's process id, breaking the one-writer rule silently."""
    for rec in list(_live):
        fd = rec._fd
        if fd >= 0:
            rec._fd = _FORKED
            os.close(fd)


os.register_at_fork(after_in_child=_disarm_in_child)
