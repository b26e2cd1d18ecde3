"""Does an eos processor keep the client contract (docs/client-contract.md)?

Why: the checkers judge Kafka and the client from what the processors recorded. A processor
that records the wrong shape, skips a completion or exits with a status the contract does not
know makes every verdict about it meaningless, so a new client is held to the contract before
its runs are trusted. Each breach is one line: the file, the op's line, the rule, what was
seen. Pure Python over the per-process history files; no Spark, no cluster.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The exit statuses of the contract's table (docs/client-contract.md, "Exit status").
EXIT_CODES = {0: "ok", 2: "bad-config", 3: "fenced", 4: "fatal", 5: "uncertain",
              6: "rewind-failed", 7: "orphaned", 8: "not-authorized", 70: "hook"}  # fmt: skip
#: What a processor records, and the keys each op's value carries.
PROCESSOR_OPS = ("start", "txn", "rebalance", "rewind", "exit")
TXN_INVOKE_KEYS = frozenset({"txn", "transactional_id", "generation", "member_id", "inputs"})
REBALANCE_EVENTS = ("assign", "revoke", "lost")
TYPES = ("invoke", "ok", "fail", "info")


@dataclass(frozen=True)
class Breach:
    """One way a history breaks the contract."""

    where: str  # "processes/3.jsonl:17"
    rule: str  # a short name from RULES
    detail: str

    def __str__(self) -> str:
        return f"{self.where}: {self.rule}: {self.detail}"


#: Every rule, with what it asks (the names are what a breach is reported under).
RULES = {
    "header": "the file starts with a format-1 process header naming an eos processor",
    "op-shape": "every op has index (0, 1, ...), time (not decreasing), process, type and f",
    "op-name": f"a processor records only {', '.join(PROCESSOR_OPS)}",
    "pairing": "each invoke is completed (ok, fail or info) by the process's next op",
    "start-first": "the first op is start; no txn before start completed ok",
    "txn-value": "a txn invoke carries txn (1, 2, ...), transactional_id, generation, "
    "member_id and inputs [[partition, offset, value], ...]; its completion the same txn "
    "and one output per input",
    "rebalance-value": "a rebalance names its event (assign, revoke, lost) and its "
    "partitions [[topic, partition], ...]",
    "exit": "an exit op is the last, with a status from the contract's table",
    "exit-status": "the status the supervisor saw is the one the exit op recorded, or the "
    "process was killed from outside",
}


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _lines(path: Path) -> Iterator[tuple[int, Any]]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield n, json.loads(line)
            except ValueError:
                yield n, None


def check_process_file(path: Path, label: str | None = None) -> list[Breach]:
    """The breaches of one processor's history file (``processes/<instance>.jsonl``)."""
    label = label or path.name
    lines = list(_lines(path))
    if not lines:
        return [Breach(f"{label}:1", "header", "the file is empty")]
    n, header = lines[0]
    meta = header.get("meta") if isinstance(header, dict) else None
    if (
        not isinstance(header, dict)
        or header.get("history_format") != 1
        or header.get("kind") != "process"
        or not isinstance(meta, dict)
        or meta.get("workload") != "eos"
        or meta.get("role") != "processor"
    ):
        return [Breach(f"{label}:{n}", "header", f"not an eos processor's header: {header!r:.120}")]
    instance = header.get("process")
    if meta.get("instance") != instance or not _is_int(instance):
        return [
            Breach(
                f"{label}:{n}",
                "header",
                f"process {instance!r} but instance {meta.get('instance')!r}",
            )
        ]
    return check_ops(instance, ((f"{label}:{n}", op) for n, op in lines[1:]))


def check_ops(instance: int, ops: Iterable[tuple[str, Any]]) -> list[Breach]:
    """The breaches of one processor's ops, in the order it wrote them (after the header)."""
    out: list[Breach] = []
    pending: tuple[str, dict[str, Any]] | None = None  # the invoke awaiting its completion
    started = False
    txn_seq = 0
    last_time: int | None = None
    exited_at: str | None = None
    for expected, (where, op) in enumerate(ops):
        if not isinstance(op, dict):
            out.append(Breach(where, "op-shape", "not a JSON object"))
            continue
        missing = [k for k in ("index", "time", "process", "type", "f") if k not in op]
        if missing:
            out.append(Breach(where, "op-shape", f"missing {', '.join(missing)}"))
            continue
        index = op.get("pindex", op["index"])
        f, kind, value = op["f"], op["type"], op.get("value")
        if index != expected:
            out.append(Breach(where, "op-shape", f"index {index}, expected {expected}"))
        if op["process"] != instance:
            out.append(Breach(where, "op-shape", f"process {op['process']!r} in {instance}'s file"))
        if not _is_int(op["time"]) or (last_time is not None and op["time"] < last_time):
            out.append(Breach(where, "op-shape", f"time {op['time']!r} after {last_time}"))
        else:
            last_time = op["time"]
        if kind not in TYPES:
            out.append(Breach(where, "op-shape", f"type {kind!r}"))
            continue
        if f not in PROCESSOR_OPS:
            out.append(Breach(where, "op-name", f"{f!r}"))
            continue
        if exited_at is not None:
            out.append(Breach(where, "exit", f"{kind} {f} after the exit op at {exited_at}"))
        if kind == "invoke":
            if pending is not None:
                out.append(Breach(where, "pairing", f"invoke {f} before {pending[0]} completed"))
            if not started and f not in ("start", "exit"):
                out.append(Breach(where, "start-first", f"invoke {f} before start completed ok"))
            if f == "txn":
                txn_seq += 1
                out.extend(_txn_invoke(where, value, txn_seq))
            elif f == "rebalance":
                out.extend(_rebalance(where, value))
            pending = (f, value if isinstance(value, dict) else {})
            continue
        if pending is None or pending[0] != f:
            was = pending[0] if pending else "nothing"
            out.append(Breach(where, "pairing", f"{kind} {f} completes {was}"))
            pending = None
            continue
        invoked = pending[1]
        pending = None
        if f == "start":
            started = started or kind == "ok"
        elif f == "txn":
            out.extend(_txn_completion(where, value, invoked))
        elif f == "rebalance":
            out.extend(_rebalance(where, value))
        elif f == "exit":
            exited_at = where
            code = value.get("code") if isinstance(value, dict) else None
            if kind != "ok" or code not in EXIT_CODES:
                out.append(Breach(where, "exit", f"{kind} exit with status {code!r}"))
    return out


def _txn_invoke(where: str, value: Any, seq: int) -> list[Breach]:
    if not isinstance(value, dict):
        return [Breach(where, "txn-value", f"invoke value {value!r:.80}")]
    if set(value) != TXN_INVOKE_KEYS:
        missing, extra = sorted(TXN_INVOKE_KEYS - set(value)), sorted(set(value) - TXN_INVOKE_KEYS)
        said = [f"missing {missing!r}"] * bool(missing) + [f"unexpected {extra!r}"] * bool(extra)
        return [Breach(where, "txn-value", f"invoke keys: {', '.join(said)}")]
    out = []
    if value["txn"] != seq:
        out.append(Breach(where, "txn-value", f"txn {value['txn']!r}, expected {seq}"))
    inputs = value["inputs"]
    if (
        not isinstance(inputs, list)
        or not inputs
        or not all(
            isinstance(i, list) and len(i) == 3 and _is_int(i[0]) and _is_int(i[1]) for i in inputs
        )
    ):
        out.append(Breach(where, "txn-value", f"inputs {inputs!r:.80}"))
    tid = value["transactional_id"]
    if tid is not None and (not isinstance(tid, str) or not tid):  # None: no transactions
        out.append(Breach(where, "txn-value", f"transactional_id {tid!r}"))
    return out


def _txn_completion(where: str, value: Any, invoked: dict[str, Any]) -> list[Breach]:
    if not isinstance(value, dict):
        return [Breach(where, "txn-value", f"completion value {value!r:.80}")]
    if value.get("txn") != invoked.get("txn"):
        return [
            Breach(
                where,
                "txn-value",
                f"completes txn {value.get('txn')!r}, invoked {invoked.get('txn')!r}",
            )
        ]
    outputs = value.get("outputs")
    inputs = invoked.get("inputs")
    if not isinstance(outputs, list) or (isinstance(inputs, list) and len(outputs) != len(inputs)):
        n = len(outputs) if isinstance(outputs, list) else outputs
        return [Breach(where, "txn-value", f"{n!r} outputs for {len(inputs or [])} inputs")]
    return []


def _rebalance(where: str, value: Any) -> list[Breach]:
    ok = (
        isinstance(value, dict)
        and value.get("event") in REBALANCE_EVENTS
        and isinstance(value.get("partitions"), list)
        and all(
            isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and _is_int(p[1])
            for p in value["partitions"]
        )
    )
    return [] if ok else [Breach(where, "rebalance-value", f"{value!r:.100}")]


def _exit_codes(run_dir: Path) -> dict[int, tuple[str, int]]:
    """instance -> (where, the status the supervisor recorded)."""
    path = run_dir / "processes" / "supervisor.jsonl"
    out: dict[int, tuple[str, int]] = {}
    if not path.exists():
        return out
    for n, op in _lines(path):
        if isinstance(op, dict) and op.get("f") == "processor-exit" and op.get("type") == "ok":
            v = op.get("value") or {}
            if _is_int(v.get("instance")) and _is_int(v.get("returncode")):
                out[v["instance"]] = (f"processes/supervisor.jsonl:{n}", v["returncode"])
    return out


def _recorded_exit(path: Path) -> int | None:
    code = None
    for _, op in _lines(path):
        if isinstance(op, dict) and op.get("f") == "exit" and op.get("type") == "ok":
            code = (op.get("value") or {}).get("code")
    return code


def check_run(run_dir: Path) -> list[Breach]:
    """Every processor file of an eos run, and the statuses its supervisor saw.

    A status the exit op did not record is a breach unless the process was killed by a
    signal (a negative status: SIGKILL from a fault, the harness's own stop)."""
    out: list[Breach] = []
    files = sorted(
        (p for p in (run_dir / "processes").glob("*.jsonl") if p.stem.isdigit()),
        key=lambda p: int(p.stem),
    )
    if not files:
        return [Breach(str(run_dir / "processes"), "header", "no processor history files")]
    for path in files:
        out.extend(check_process_file(path, f"processes/{path.name}"))
    for instance, (where, status) in sorted(_exit_codes(run_dir).items()):
        path = run_dir / "processes" / f"{instance}.jsonl"
        recorded = _recorded_exit(path) if path.exists() else None
        if status < 0:
            continue  # killed by a signal: no exit op is owed
        if status not in EXIT_CODES:
            out.append(Breach(where, "exit-status", f"instance {instance} exited {status}"))
        elif recorded != status:
            out.append(
                Breach(
                    where,
                    "exit-status",
                    f"instance {instance} exited {status}, recorded {recorded!r}",
                )
            )
    return out
