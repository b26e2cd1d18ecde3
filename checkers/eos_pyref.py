"""The eos checks in plain single-process Python: the reference the Spark version must match.

Why a second implementation: the Spark checks (:mod:`checkers.eos_checks`) are written as joins
and aggregations so they scale, which makes them hard to eyeball. This module states the same
definitions (``docs/anomalies.md``, "eos workload") as straightforward loops over the parsed
history, so the tests can demand identical whole results, examples included, and so small
runs have a fast baseline. Examples, results and the verdict are built by
:mod:`checkers.eos_results`, as in the Spark engine.

Public API::

    check_eos_py(run_dir, *, max_examples=8) -> dict     # same shape as check_eos
    parse_run(run_dir) -> EosRun                        # raises CheckerInputError
    SAFETY_CHECKS, combine_eos(results, liveness)
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from checkers import eos_results as X
from checkers.eos_pyref_parse import EosRun, Op, Rec, parse_run
from checkers.eos_results import SAFETY_CHECKS, Example, combine_eos, ident_order
from checkers.log_pyref import aborted_in_log
from history.logdump import read_logdump

__all__ = ["SAFETY_CHECKS", "EosRun", "check_eos_py", "combine_eos", "parse_run"]


# ------------------------------------------------------------------------------------------
# Helpers shared by the checks


def _n_out(run: EosRun) -> int:
    return max(len(run.reads_ok), 1)


def _readable(run: EosRun, src_partition: int) -> bool:
    """Whether the drain read the output partition this input's output must land in."""
    return run.reads_ok.get(src_partition % _n_out(run), False)


def _result(run: EosRun, name: str, cases: list[Example], max_examples: int) -> dict[str, Any]:
    """Every case found, counted; the first ``max_examples`` shown (cases are in check order)."""
    ops_of = lambda idx: {i: run.ops[i] for i in idx}  # noqa: E731
    return X.check_result(name, len(cases), cases[:max_examples], ops_of)


def _txn_idx(run: EosRun, key: tuple[int | None, int | None]) -> list[int]:
    """History indices of a transaction's invoke and completion (those recorded)."""
    if key[0] is None or key[1] is None:
        return []
    k = (key[0], key[1])
    return [t.index for t in (run.txn_invoke.get(k), run.txn_done.get(k)) if t]


# ------------------------------------------------------------------------------------------
# The checks


def check_lost(run: EosRun, max_examples: int) -> dict[str, Any]:
    """Acknowledged seeds below the group's committed offset with no committed output."""
    have = {r["ident"] for r in run.drain}
    offsets = [run.offsets_op["index"]] if run.offsets_op else []
    cases = [
        X.lost(val, p, o, run.committed[p], [send_index, *offsets])
        for val, p, o, send_index in sorted(run.seeds, key=lambda s: (s[1], s[2], s[3]))
        if o < run.committed.get(p, -1) and f"{p}/{o}" not in have and _readable(run, p)
    ]
    return _result(run, "lost", cases, max_examples)


def check_duplicate(run: EosRun, max_examples: int) -> dict[str, Any]:
    """Inputs with more than one committed output."""
    by: dict[str, list[Rec]] = defaultdict(list)
    for r in run.drain:
        by[r["ident"]].append(r)
    cases = []
    for ident in sorted(by, key=ident_order):
        rs = by[ident]
        if len(rs) > 1:
            idx = [i for r in rs for i in _txn_idx(run, (r["instance"], r["txn_seq"]))]
            cases.append(X.duplicate(ident, rs, idx))
    return _result(run, "duplicate", cases, max_examples)


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
        idx = _txn_idx(run, key)
        if inst in fences and inv is not None and inv.time > fences[inst][0]:
            fence = fences[inst][1]["index"]
            cases.append(X.zombie_write(r["in_value"], r, idx, fence_index=fence))
        elif r["generation"] is not None and r["generation"] >= 0 and r["src_p"] is not None:
            newer = [
                (gen, i2, m)
                for (gen, i2), m in groups[r["src_p"]].items()
                if gen > r["generation"] and i2 != inst and m <= r["src_o"]
            ]
            if newer:
                cases.append(X.zombie_write(r["in_value"], r, idx, newer=min(newer)))
    return _result(run, "zombie-write", cases, max_examples)


def check_aborted_read(run: EosRun, max_examples: int) -> dict[str, Any]:
    """Drained records of aborted/open transactions or from poison inputs; poison in txns."""
    outcome = _log_outcomes(run)
    cases = []
    for r in run.drain:
        poison = r["in_value"] in run.poison or r["value"] in run.poison or r["key"] in run.poison
        oc = outcome.get((r["topic"], r["partition"], r["offset"]))
        if poison or oc in ("aborted", "open"):
            kind = "poison-output" if poison else f"{oc}-in-log"
            idx = _txn_idx(run, (r["instance"], r["txn_seq"]))
            cases.append(X.aborted_read([r["in_value"]], kind, r, idx))
    for key in sorted(run.txn_invoke):
        inv = run.txn_invoke[key]
        bad = [x[2] for x in inv.items if x[2] in run.poison]
        if bad:
            cases.append(X.aborted_read(bad, "poison-input", None, _txn_idx(run, key)))
    return _result(run, "aborted-read", cases, max_examples)


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
        inputs = run.txn_invoke[key].items
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
            cases.append(X.torn_transaction(key, kind, inputs, have, _txn_idx(run, key)))
    return _result(run, "torn-transaction", cases, max_examples)


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
            cases.append(X.order(r["partition"], r["src_p"], prev, r))
        last[k] = r
    return _result(run, "order", cases, max_examples)


def check_hanging(run: EosRun, max_examples: int) -> dict[str, Any]:
    """Partitions with LSO < HWM at the end, and rows reported by find-hanging."""
    found: list[tuple[int, int, Example]] = []
    for op in run.watermarks:
        for pos, w in enumerate(op["value"].get("partitions") or []):
            lso, hwm = w.get("lso"), w.get("hwm")
            if lso is not None and hwm is not None and lso < hwm:
                ex = X.lso_below_hwm(op["value"]["topic"], w["partition"], lso, hwm, op["index"])
                found.append((op["index"], pos, ex))
    for op in run.find_hanging:
        pos = 0
        for res in op["value"].get("results") or []:
            for row in res.get("rows") or []:
                found.append(
                    (op["index"], pos, X.find_hanging_row(res.get("broker"), row, op["index"]))
                )
                pos += 1
    cases = [ex for _i, _p, ex in sorted(found, key=lambda f: (f[0], f[1]))]
    return _result(run, "hanging-transaction", cases, max_examples)


def check_progress(run: EosRun, max_examples: int) -> dict[str, Any]:
    """Liveness: the drain finished and every acknowledged seed was consumed and read."""
    drain_type = None if run.drain_op is None else run.drain_op["type"]
    unread = sorted(p for p, ok in run.reads_ok.items() if not ok)
    missing = [s for s in run.seeds if s[2] >= run.committed.get(s[1], -1)]
    missing.sort(key=lambda s: (s[1], s[2], s[3]))
    first = [(v, p, o, run.committed.get(p)) for v, p, o, _i in missing[:max_examples]]
    return X.progress_result(drain_type, unread, len(missing), first)


CHECKS = {
    "lost": check_lost,
    "duplicate": check_duplicate,
    "zombie-write": check_zombie,
    "aborted-read": check_aborted_read,
    "torn-transaction": check_torn,
    "order": check_order,
    "hanging-transaction": check_hanging,
}


def check_eos_py(run_dir: str | os.PathLike[str], *, max_examples: int = 8) -> dict[str, Any]:
    """Every eos check on a run, single-process; input errors raise CheckerInputError."""
    run = parse_run(run_dir)
    checks = {name: (lambda fn=fn: fn(run, max_examples)) for name, fn in CHECKS.items()}
    out = X.run_checks(checks, lambda: check_progress(run, max_examples))
    if run.notes:
        out["input_notes"] = list(run.notes)
    return out
