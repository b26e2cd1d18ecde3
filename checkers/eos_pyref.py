"""The eos checks in plain single-process Python: the reference the Spark version must match.

Why a second implementation: the Spark checks (:mod:`checkers.eos_checks`) are written as joins
and aggregations so they scale, which makes them hard to eyeball. This module states the same
definitions (``docs/anomalies.md``, "eos workload") as straightforward loops over the parsed
history, so the tests can cross-check every count, and so small runs have a fast baseline.

Public API::

    check_eos_py(run_dir, *, max_examples=8) -> dict     # same shape as check_eos
    parse_run(run_dir) -> EosRun                        # raises CheckerInputError
    SAFETY_CHECKS, combine_eos(results, liveness)
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from checkers.eos_pyref_parse import EosRun, Op, Rec, parse_run
from checkers.pyref import CheckerInputError, aborted_in_log, read_logdump

__all__ = ["SAFETY_CHECKS", "EosRun", "check_eos_py", "combine_eos", "parse_run"]

#: The safety checks, in report order; ``progress`` (liveness) is reported apart.
SAFETY_CHECKS: tuple[str, ...] = (
    "lost",
    "duplicate",
    "zombie-write",
    "aborted-read",
    "torn-transaction",
    "order",
    "hanging-transaction",
)


# ------------------------------------------------------------------------------------------
# Helpers shared by the checks


def _n_out(run: EosRun) -> int:
    return max(len(run.reads_ok), 1)


def _readable(run: EosRun, src_partition: int) -> bool:
    """Whether the drain read the output partition this input's output must land in."""
    return run.reads_ok.get(src_partition % _n_out(run), False)


def _rec(r: Rec) -> dict[str, Any]:
    keep = ("topic", "partition", "offset", "key", "value", "headers")
    return {k: r[k] for k in keep}


def result(name: str, cases: list[dict[str, Any]], max_examples: int) -> dict[str, Any]:
    """One check's verdict: invalid iff it found something."""
    return {"valid": not cases, "count": len(cases), "examples": cases[:max_examples]}


def _txn_ops(run: EosRun, key: tuple[int, int]) -> list[Op]:
    return [run.ops[t.index] for t in (run.txn_invoke.get(key), run.txn_done.get(key)) if t]


# ------------------------------------------------------------------------------------------
# The checks


def check_lost(run: EosRun, max_examples: int) -> dict[str, Any]:
    """Acknowledged seeds below the group's committed offset with no committed output."""
    have = {r["ident"] for r in run.drain}
    cases = []
    for val, p, o, send_index in sorted(run.seeds, key=lambda s: (s[1], s[2])):
        if o < run.committed.get(p, -1) and f"{p}/{o}" not in have and _readable(run, p):
            send = run.ops[send_index]
            cases.append(
                {
                    "values": [val],
                    "input": [p, o],
                    "committed_offset": run.committed[p],
                    "ops": [send] + ([run.offsets_op] if run.offsets_op else []),
                }
            )
    return result("lost", cases, max_examples)


def check_duplicate(run: EosRun, max_examples: int) -> dict[str, Any]:
    """Inputs with more than one committed output."""
    by: dict[str, list[Rec]] = defaultdict(list)
    for r in run.drain:
        by[r["ident"]].append(r)
    cases = []
    for ident in sorted(by, key=_ident_order):
        rs = by[ident]
        if len(rs) > 1:
            keys = sorted({(r["instance"], r["txn_seq"]) for r in rs}, key=str)
            ops = [o for k in keys if k[0] is not None for o in _txn_ops(run, k)]  # type: ignore[arg-type]
            cases.append(
                {
                    "values": [rs[0]["in_value"]],
                    "input": ident,
                    "copies": len(rs),
                    "records": [_rec(r) for r in rs],
                    "ops": ops,
                }
            )
    return result("duplicate", cases, max_examples)


def _ident_order(ident: str) -> tuple[int, int, str]:
    if ident.startswith("v:"):
        return (1 << 40, 0, ident)
    p, o = ident.split("/")
    return (int(p), int(o), "")


def fence_times(run: EosRun) -> dict[int, tuple[int, Op]]:
    """Instance -> (time, op) of the first fencing of its transactional id after its start.

    Fencing events: another instance's ``start`` ok with the same transactional id (its
    ``init_transactions`` bumped the epoch) or a nemesis hijack ``start`` ok for that id.
    """
    events = [(o["time"], o["value"].get("transactional_id"), o) for o in run.hijacks]
    events += [(o["time"], o["value"].get("transactional_id"), o) for o in run.starts]
    out: dict[int, tuple[int, Op]] = {}
    for s in run.starts:
        tid, inst = s["value"].get("transactional_id"), s["process"]
        if tid is None:
            continue
        later = [
            (t, e)
            for t, etid, e in events
            if etid == tid and t > s["time"] and e["process"] != inst
        ]
        if later:
            out[inst] = min(later, key=lambda x: (x[0], x[1]["index"]))
    return out


def check_zombie(run: EosRun, max_examples: int) -> dict[str, Any]:
    """Committed outputs of fenced instances or of generations another instance overtook."""
    fences = fence_times(run)
    groups: dict[int, dict[tuple[int, int], int]] = defaultdict(dict)  # p -> (gen, inst) -> min
    for r in run.drain:
        if r["instance"] is None or r["generation"] is None or r["src_p"] is None:
            continue
        if r["generation"] < 0:
            continue
        g = groups[r["src_p"]]
        k = (r["generation"], r["instance"])
        g[k] = min(g.get(k, r["src_o"]), r["src_o"])
    cases = []
    for r in run.drain:
        inst = r["instance"]
        if inst is None:
            continue
        key = (inst, r["txn_seq"])
        inv = run.txn_invoke.get(key) if r["txn_seq"] is not None else None
        why: dict[str, Any] | None = None
        if inst in fences and inv is not None and inv.time > fences[inst][0]:
            why = {"reason": "fenced", "fence_op": fences[inst][1]}
        elif r["generation"] is not None and r["generation"] >= 0 and r["src_p"] is not None:
            newer = [
                (gen, i2, m)
                for (gen, i2), m in groups[r["src_p"]].items()
                if gen > r["generation"] and i2 != inst and m <= r["src_o"]
            ]
            if newer:
                gen, i2, m = min(newer)
                why = {
                    "reason": "overtaken",
                    "newer": {"generation": gen, "instance": i2, "min_src_offset": m},
                }
        if why is not None:
            cases.append(
                {"values": [r["in_value"]], "records": [_rec(r)], "ops": _txn_ops(run, key)} | why
            )
    return result("zombie-write", cases, max_examples)


def check_aborted_read(run: EosRun, max_examples: int) -> dict[str, Any]:
    """Drained records of aborted/open transactions or from poison inputs; poison in txns."""
    outcome = _log_outcomes(run)
    cases = []
    for r in run.drain:
        poison = r["in_value"] in run.poison or r["value"] in run.poison or r["key"] in run.poison
        oc = outcome.get((r["topic"], r["partition"], r["offset"]))
        if poison or oc in ("aborted", "open"):
            cases.append(
                {
                    "values": [r["in_value"]],
                    "kind": "poison-output" if poison else f"{oc}-in-log",
                    "records": [_rec(r)],
                    "ops": _txn_ops(run, (r["instance"], r["txn_seq"])),
                }
            )
    for key in sorted(run.txn_invoke):
        inv = run.txn_invoke[key]
        bad = [x[2] for x in inv.items if x[2] in run.poison]
        if bad:
            cases.append({"values": bad, "kind": "poison-input", "ops": _txn_ops(run, key)})
    return result("aborted-read", cases, max_examples)


def _log_outcomes(run: EosRun) -> dict[tuple[str, int, int], str]:
    """(topic, partition, offset) -> outcome from the broker log dump, if the run has one."""
    if run.run_dir is None:
        return {}
    path = run.run_dir / "evidence" / "logdump.jsonl"
    if not path.is_file() or run.output_topic is None:
        return {}
    rows = aborted_in_log(read_logdump(path))
    return {
        (d["topic"], d["partition"], d["offset"]): d["outcome"]
        for d in rows
        if d["topic"] == run.output_topic
    }


def check_torn(run: EosRun, max_examples: int) -> dict[str, Any]:
    """Transactions partly visible, or recorded ok with offsets committed but no outputs."""
    present: dict[tuple[int, int], set[str]] = defaultdict(set)
    for r in run.drain:
        if r["instance"] is not None and r["txn_seq"] is not None:
            present[(r["instance"], r["txn_seq"])].add(r["ident"])
    cases = []
    for key in sorted(run.txn_invoke):
        inv = run.txn_invoke[key]
        inputs = inv.items
        want = {f"{int(p)}/{int(o)}" for p, o, _v in inputs}
        if not want or not all(_readable(run, int(x[0])) for x in inputs):
            continue
        have = present.get(key, set()) & want
        done = run.txn_done.get(key)
        kind = None
        if have and have != want:
            kind = "partial"
        elif not have and done is not None and done.type == "ok":
            offs = done.items
            if offs and all(run.committed.get(int(p), -1) >= int(n) for p, n in offs):
                kind = "ok-offsets-committed-outputs-absent"
        if kind is not None:
            cases.append(
                {
                    "values": [x[2] for x in inputs],
                    "kind": kind,
                    "txn": list(key),
                    "expected": len(want),
                    "present": len(have),
                    "missing": sorted(want - have, key=_ident_order),
                    "ops": _txn_ops(run, key),
                }
            )
    return result("torn-transaction", cases, max_examples)


def check_order(run: EosRun, max_examples: int) -> dict[str, Any]:
    """Within an output partition, first outputs of one input partition in input order."""
    seen: set[str] = set()
    last: dict[tuple[int, int], Rec] = {}
    cases = []
    for r in run.drain:  # sorted by (partition, offset)
        if r["src_p"] is None or r["ident"] in seen:
            continue
        seen.add(r["ident"])
        k = (r["partition"], r["src_p"])
        prev = last.get(k)
        if prev is not None and r["src_o"] < prev["src_o"]:
            cases.append(
                {
                    "values": [prev["in_value"], r["in_value"]],
                    "output_partition": r["partition"],
                    "src_partition": r["src_p"],
                    "records": [_rec(prev), _rec(r)],
                }
            )
        last[k] = r
    return result("order", cases, max_examples)


def check_hanging(run: EosRun, max_examples: int) -> dict[str, Any]:
    """Partitions with LSO < HWM at the end, and rows reported by find-hanging."""
    cases = []
    for op in run.watermarks:
        for w in op["value"].get("partitions") or []:
            lso, hwm = w.get("lso"), w.get("hwm")
            if lso is not None and hwm is not None and lso < hwm:
                cases.append(
                    {"values": [], "kind": "lso-below-hwm", "topic": op["value"]["topic"]}
                    | {"partition": w["partition"], "lso": lso, "hwm": hwm, "ops": [op]}
                )
    for op in run.find_hanging:
        for res in op["value"].get("results") or []:
            for row in res.get("rows") or []:
                cases.append(
                    {"values": [], "kind": "find-hanging", "broker": res.get("broker")}
                    | {"row": row, "ops": [op]}
                )
    return result("hanging-transaction", cases, max_examples)


def check_progress(run: EosRun, max_examples: int) -> dict[str, Any]:
    """Liveness: the drain finished and every acknowledged seed was consumed and read."""
    drain_type = None if run.drain_op is None else run.drain_op["type"]
    unread = sorted(p for p, ok in run.reads_ok.items() if not ok)
    missing = [s for s in run.seeds if s[2] >= run.committed.get(s[1], -1)]
    missing.sort(key=lambda s: (s[1], s[2]))
    ok = drain_type == "ok" and not unread and not missing
    return {
        "valid": ok,
        "drain": drain_type,
        "incomplete_reads": unread,
        "unconsumed": len(missing),
        "count": len(missing) + len(unread) + (0 if drain_type == "ok" else 1),
        "examples": [
            {"values": [v], "input": [p, o], "committed_offset": run.committed.get(p)}
            for v, p, o, _i in missing[:max_examples]
        ],
    }


CHECKS = {
    "lost": check_lost,
    "duplicate": check_duplicate,
    "zombie-write": check_zombie,
    "aborted-read": check_aborted_read,
    "torn-transaction": check_torn,
    "order": check_order,
    "hanging-transaction": check_hanging,
}


def combine_eos(results: dict[str, dict[str, Any]], liveness: dict[str, Any]) -> dict[str, Any]:
    """Safety verdict: false if any check failed, unknown if any could not run, else true."""
    valids = [r.get("valid") for r in results.values()]
    valid: bool | str = False if False in valids else ("unknown" if "unknown" in valids else True)
    anomalies = {k: int(r.get("count", 0)) for k, r in results.items() if r.get("valid") is False}
    return {
        "valid": valid,
        "anomalies": anomalies,
        "checkers": results,
        "liveness": liveness,
    }


def check_eos_py(run_dir: str | os.PathLike[str], *, max_examples: int = 8) -> dict[str, Any]:
    """Every eos check on a run, single-process; input errors raise CheckerInputError."""
    run = parse_run(run_dir)
    results: dict[str, dict[str, Any]] = {}
    for name, fn in CHECKS.items():
        try:
            results[name] = fn(run, max_examples)
        except CheckerInputError:
            raise
        except Exception as e:  # a bug in one check must not pass the run
            results[name] = {"valid": "unknown", "error": f"{type(e).__name__}: {e}"}
    return combine_eos(results, check_progress(run, max_examples))
