"""The eos checks in plain single-process Python: the reference the Spark version must match.

Why a second implementation: the Spark checks (:mod:`checkers.eos.checks`) are written as joins
and aggregations so they scale, which makes them hard to eyeball. This module states the same
definitions (``docs/anomalies.md``, "eos workload") as straightforward loops over the parsed
history, so the tests can demand identical whole results, examples included, and so small
runs have a fast baseline. Examples, results and the verdict are built by
:mod:`checkers.eos.results`, as in the Spark engine.

Public API::

    check_eos_py(run_dir, *, max_examples=8) -> dict     # same shape as check_eos
    parse_run(run_dir) -> EosRun                        # raises CheckerInputError
    SAFETY_CHECKS, combine_eos(results, liveness)
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from checkers.eos import assignments as A
from checkers.eos import results as X
from checkers.eos.pyref_parse import EosRun, Op, Rec, TxnOp, parse_run
from checkers.eos.results import SAFETY_CHECKS, Example, combine_eos, ident_order
from checkers.logdump.pyref import log_positions, resolve_selectors
from checkers.logdump.rules import Pos, position_evidence, position_selectors
from history.logdump import CTRL, OFF, ROW, LogDump, fetch_lines, read_logdump
from history.schema import wall_ms

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
    found = [
        (val, p, o, send_index)
        for val, p, o, send_index in sorted(run.seeds, key=lambda s: (s[1], s[2], s[3]))
        if o < run.committed.get(p, -1) and f"{p}/{o}" not in have and _readable(run, p)
    ]
    top = found[:max_examples]
    writers: dict[tuple[int, int], list[X.Writer]] = defaultdict(list)
    want = {(p, o) for _v, p, o, _i in top}
    for key, inv in run.txn_invoke.items() if want else ():
        done = run.txn_done.get(key)
        for p, o, _v in inv.items:
            if (int(p), int(o)) in want:
                outcome, done_at = (done.type, done.index) if done else (None, None)
                writers[(int(p), int(o))].append((key[0], key[1], outcome, inv.index, done_at))
    ops = _ops(run, sorted({w[4] for ws in writers.values() for w in ws if w[4] is not None}))
    written = {src: X.written_outputs(src, writers.get(src, []), ops) for src in want}
    targets = {src: X.evidence_target(w) for src, w in written.items()}
    ev = _log_at(run, [t for t in targets.values() if t is not None])
    cases = [
        X.lost(
            val,
            p,
            o,
            run.committed[p],
            [send_index, *offsets],
            written=written[(p, o)],
            log=ev.get(targets[(p, o)]) if targets[(p, o)] else None,
        )
        for val, p, o, send_index in top
    ]
    return X.check_result("lost", len(found), cases, lambda idx: _ops(run, idx))


def _log_at(run: EosRun, outputs: list[tuple[int, int]]) -> dict[tuple[int, int], dict[str, Any]]:
    """Broker-log evidence of output positions (partition, offset) of the output topic."""
    log = run_log(run)
    if log is None or run.output_topic is None or not outputs:
        return {}
    got = log.evidence([(run.output_topic, p, o) for p, o in outputs])
    return {(p, o): e for (_t, p, o), e in got.items()}


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


#: A drained or watched position: (topic, partition, offset).
Where = tuple[str, int, int]


class RunLog:
    """The run's broker log dump, read once for every check that joins it with the history.

    The reference form of :class:`checkers.logdump.evidence.PositionLog`: positions per topic
    (:func:`checkers.logs.pyref.log_positions`) and the ``log`` evidence of a few positions.
    """

    def __init__(self, dump: LogDump) -> None:
        self.dump = dump
        self._positions: dict[str, dict[tuple[int, int], Pos]] = {}

    def positions(self, topic: str) -> dict[tuple[int, int], Pos]:
        if topic not in self._positions:
            self._positions[topic] = log_positions(self.dump, topic)
        return self._positions[topic]

    def marker_times(self, topic: str, where: set[tuple[int, int, int]]) -> dict[Any, int]:
        """(node, partition, offset) -> create_time of those markers of ``topic`` (a second
        pass over the dump's lines, for the few the checks ask about)."""
        wanted: dict[tuple[int, int], set[int]] = defaultdict(set)
        for node, part, off in where:
            wanted[(node, part)].add(off)
        rows: dict[int, tuple[int, int, int]] = {}
        for (node, part), offsets in wanted.items():
            for r in self.dump.parts.get(("data", topic, part), {}).get(node, []):
                if r[CTRL] and r[OFF] in offsets:
                    rows[r[ROW]] = (node, part, r[OFF])
        got = fetch_lines(self.dump.path, rows)
        return {
            rows[n]: int(rec["create_time"])
            for n, rec in got.items()
            if rec.get("create_time") is not None
        }

    def evidence(self, where: list[Where]) -> dict[Where, dict[str, Any]]:
        """The ``log`` evidence of each position the dump holds (absent ones are left out)."""
        found: dict[Where, Pos] = {}
        for w in where:
            pos = self.positions(w[0]).get((w[1], w[2]))
            if pos is not None:
                found[w] = pos
        sels = [sel for w, pos in found.items() for sel in position_selectors(*w, pos)]
        resolved = resolve_selectors(self.dump, sels)
        return {w: position_evidence(*w, pos, resolved) for w, pos in found.items()}


def run_log(run: EosRun) -> RunLog | None:
    """The run's :class:`RunLog` (read on first use), or None if the run has no dump."""
    if "log" not in run.extras:
        path = None if run.run_dir is None else run.run_dir / "evidence" / "logdump.jsonl"
        run.extras["log"] = RunLog(read_logdump(path)) if path and path.is_file() else None
    return run.extras["log"]


def _drained_positions(run: EosRun) -> dict[tuple[int, int], Pos]:
    """The output topic's logged positions, or nothing without a dump (or drain)."""
    log = run_log(run)
    if log is None or run.output_topic is None:
        return {}
    return log.positions(run.output_topic)


def _is_poison(run: EosRun, r: Rec) -> bool:
    return r["in_value"] in run.poison or r["value"] in run.poison or r["key"] in run.poison


def _evidence(run: EosRun, recs: list[Rec | None]) -> dict[Where, dict[str, Any]]:
    """Broker-log evidence of the drained records a check is about to show."""
    log = run_log(run)
    if log is None:
        return {}
    return log.evidence([(r.topic, r.partition, r.offset) for r in recs if r is not None])


def check_aborted_read(run: EosRun, max_examples: int) -> dict[str, Any]:
    """Drained records of aborted/open transactions or from poison inputs; poison in txns."""
    pos = _drained_positions(run)
    found: list[tuple[list[str | None], str, Rec | None, list[int]]] = []
    for r in run.drain:
        poison = _is_poison(run, r)
        p = pos.get((r.partition, r.offset))
        oc = None if p is None else p.outcome
        if poison or oc in ("aborted", "open"):
            kind = "poison-output" if poison else f"{oc}-in-log"
            idx = _txn_idx(run, (r["instance"], r["txn_seq"]))
            found.append(([r["in_value"]], kind, r, idx))
    for key in sorted(run.txn_invoke):
        inv = run.txn_invoke[key]
        bad = [x[2] for x in inv.items if x[2] in run.poison]
        if bad:
            found.append((bad, "poison-input", None, _txn_idx(run, key)))
    top = found[:max_examples]
    ev = _evidence(run, [r for _v, _k, r, _i in top])
    cases = [
        X.aborted_read(v, k, r, i, None if r is None else ev.get((r.topic, r.partition, r.offset)))
        for v, k, r, i in top
    ]
    return X.check_result("aborted-read", len(found), cases, lambda idx: _ops(run, idx))


def _ops(run: EosRun, idx: list[int]) -> dict[int, Op]:
    return {i: run.ops[i] for i in idx}


def check_committed_later(run: EosRun, max_examples: int) -> dict[str, Any]:
    """Drained records that a later transaction than their writer's committed (KIP-890).

    ``writer-aborted``: the writer transaction its headers name ended ``fail``.
    ``merged-in-log``: the broker log shows the marker that committed it also committed
    records of a writer transaction invoked later. Records aborted-read names are left to it.
    """
    pos = _drained_positions(run)
    early = {id(r) for r, _ms in _premature(run)}
    # The latest writer (by txn invoke) among the drained records each COMMIT marker ended.
    newest: dict[tuple[int, int, int], tuple[int, int, int]] = {}
    for r in run.drain:
        inv = _invoke_of(run, r)
        p = pos.get((r.partition, r.offset))
        if inv is None or p is None or p.outcome != "committed" or p.end_marker is None:
            continue
        k = (r.partition, p.producerId, p.end_marker[0])
        cand = (inv.index, r["instance"], r["txn_seq"])
        newest[k] = max(newest.get(k, cand), cand)
    found: list[tuple[Rec, str, tuple[int, int, int] | None]] = []
    for r in run.drain:  # by output position
        inv = _invoke_of(run, r)
        if inv is None or _is_poison(run, r):
            continue
        p = pos.get((r.partition, r.offset))
        if p is not None and p.outcome in ("aborted", "open"):
            continue  # an aborted-read
        if id(r) in early:
            continue  # a premature-commit
        later = None
        if p is not None and p.outcome == "committed" and p.end_marker is not None:
            top = newest[(r.partition, p.producerId, p.end_marker[0])]
            later = top if top[0] > inv.index else None
        done = run.txn_done.get((r["instance"], r["txn_seq"]))
        if done is not None and done.type == "fail":
            found.append((r, "writer-aborted", later))
        elif later is not None:
            found.append((r, "merged-in-log", later))
    top_cases = found[:max_examples]
    ev = _evidence(run, [r for r, _k, _l in top_cases])
    cases = []
    for r, kind, later in top_cases:
        key = (r["instance"], r["txn_seq"])
        done = run.txn_done.get(key)
        lat = None
        lat_idx: list[int] = []
        if later is not None:
            lat_key = (later[1], later[2])
            lat_done = run.txn_done.get(lat_key)
            lat = (later[1], later[2], None if lat_done is None else lat_done.type)
            lat_idx = _txn_idx(run, lat_key)
        cases.append(
            X.committed_later(
                r["in_value"],
                kind,
                key,
                None if done is None else done.type,
                r,
                _txn_idx(run, key),
                later=lat,
                later_idx=lat_idx,
                log=ev.get((r.topic, r.partition, r.offset)),
            )
        )
    name = "committed-in-later-transaction"
    return X.check_result(name, len(found), cases, lambda idx: _ops(run, idx))


def _premature(run: EosRun) -> list[tuple[Rec, tuple[int, int]]]:
    """Drained records of a ``fail`` transaction whose COMMIT marker the broker wrote before
    the client recorded the failure, each with (marker ms, failure ms); by output position.
    Aborted-read's records (aborted, open or poison) are left to it. Found once per run (it
    reads marker lines from the dump): two checks ask."""
    if "premature" not in run.extras:
        run.extras["premature"] = _find_premature(run)
    return run.extras["premature"]


def _find_premature(run: EosRun) -> list[tuple[Rec, tuple[int, int]]]:
    log = run_log(run)
    pos = _drained_positions(run)
    if log is None or run.output_topic is None:
        return []
    cands: list[tuple[Rec, Pos, TxnOp]] = []
    for r in run.drain:
        done = run.txn_done.get((r["instance"], r["txn_seq"]))
        p = pos.get((r.partition, r.offset))
        if done is None or done.type != "fail" or _invoke_of(run, r) is None:
            continue
        if p is None or p.outcome != "committed" or p.end_marker is None or _is_poison(run, r):
            continue
        cands.append((r, p, done))
    if not cands:
        return []
    times = log.marker_times(
        run.output_topic, {(p.node, r.partition, p.end_marker[0]) for r, p, _d in cands}
    )
    out = []
    for r, p, done in cands:
        marker_ms = times.get((p.node, r.partition, p.end_marker[0]))
        failed_ms = wall_ms(run.ops[done.index]["wall"])  # validated: it parses
        if marker_ms is not None and failed_ms is not None and marker_ms < failed_ms:
            out.append((r, (marker_ms, failed_ms)))
    return out


def check_premature_commit(run: EosRun, max_examples: int) -> dict[str, Any]:
    """Drained records of a failed transaction that a COMMIT marker written before the
    failure committed (KAFKA-17754's stale EndTxn); needs the dump."""
    found = _premature(run)
    top = found[:max_examples]
    ev = _evidence(run, [r for r, _t in top])
    cases = [
        X.premature_commit(
            r["in_value"],
            (r["instance"], r["txn_seq"]),
            r,
            _txn_idx(run, (r["instance"], r["txn_seq"])),
            marker_ms=t[0],
            failed_ms=t[1],
            log=ev.get((r.topic, r.partition, r.offset)),
        )
        for r, t in top
    ]
    return X.check_result("premature-commit", len(found), cases, lambda idx: _ops(run, idx))


def _invoke_of(run: EosRun, r: Rec) -> TxnOp | None:
    """The ``txn`` invoke a drained record's headers name (None if they name none)."""
    if r["instance"] is None or r["txn_seq"] is None:
        return None
    return run.txn_invoke.get((r["instance"], r["txn_seq"]))


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
            cases.append((key, kind, inputs, have))
    top = cases[:max_examples]
    dones = {key: run.txn_done.get(key) for key, _k, _i, _h in top}
    done_ops = {key: run.ops[d.index] for key, d in dones.items() if d is not None}
    ev = _log_at(run, X.torn_output_positions(done_ops.values()))
    made = [
        X.torn_transaction(
            key, kind, inputs, have, _txn_idx(run, key), done=done_ops.get(key), log_of=ev.get
        )
        for key, kind, inputs, have in top
    ]
    return X.check_result("torn-transaction", len(cases), made, lambda idx: _ops(run, idx))


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
    watched: list[X.Watched] = []
    for op in run.watermarks:
        for pos, w in enumerate(op["value"].get("partitions") or []):
            lso, hwm = w.get("lso"), w.get("hwm")
            if lso is not None and hwm is not None and lso < hwm:
                topic = op["value"]["topic"]
                watched.append(
                    X.Watched(op["index"], pos, op["time"], topic, w["partition"], lso, hwm)
                )
    rows: list[X.HangingRow] = []
    for op in run.find_hanging:
        pos = 0
        for res in op["value"].get("results") or []:
            for row in res.get("rows") or []:
                rows.append(X.HangingRow(op["index"], pos, res.get("broker"), row))
                pos += 1
    cases = X.hanging_cases(
        watched,
        rows,
        watched_topics={op["value"].get("topic") for op in run.watermarks},
        find_hanging_ran=bool(run.find_hanging),
        last_write=run.last_write,
        timeout_ms=run.txn_timeout_ms,
    )
    top = cases[:max_examples]
    log = run_log(run)
    stuck = [(c.topic, c.partition, c.lso) for _k, c, _f in top if isinstance(c, X.Watched)]
    ev = {} if log is None else log.evidence(stuck)
    made = [
        X.lso_below_hwm(c, f, ev.get((c.topic, c.partition, c.lso)))
        if isinstance(c, X.Watched)
        else X.find_hanging_row(c, f)
        for _k, c, f in top
    ]
    return X.check_result("hanging-transaction", len(cases), made, lambda idx: _ops(run, idx))


def check_progress(run: EosRun, max_examples: int) -> dict[str, Any]:
    """Liveness: the drain finished and every acknowledged seed was consumed and read."""
    drain_type = None if run.drain_op is None else run.drain_op["type"]
    unread = sorted(p for p, ok in run.reads_ok.items() if not ok)
    missing = [s for s in run.seeds if s[2] >= run.committed.get(s[1], -1)]
    missing.sort(key=lambda s: (s[1], s[2], s[3]))
    first = [(v, p, o, run.committed.get(p)) for v, p, o, _i in missing[:max_examples]]
    return X.progress_result(drain_type, unread, len(missing), first)


def check_started_below(run: EosRun, max_examples: int) -> dict[str, Any]:
    """:mod:`checkers.eos.assignments`' reference over the parsed transactions."""
    invokes = {
        k: (t.index, [(int(p), int(o), v) for p, o, v in t.items if None not in (p, o)])
        for k, t in run.txn_invoke.items()
    }
    dones = {k: (t.index, t.type, list(t.items)) for k, t in run.txn_done.items()}
    facts = A.reference_facts(run.rebalances, invokes, dones)
    cases = A.examples(facts, run.rebalances, len(facts))
    return _result(run, "started-below-committed", cases, max_examples)


def check_invalid_state_commit(run: EosRun, max_examples: int) -> dict[str, Any]:
    """Transactions whose commit was refused with INVALID_TXN_STATE (KAFKA-20785), in
    history order."""
    cases = []
    for key, done in sorted(run.txn_done.items(), key=lambda kv: kv[1].index):
        if done.type != "info" or key not in run.txn_invoke:
            continue
        ex = X.invalid_state_commit(*key, run.ops[done.index].get("error"), _txn_idx(run, key))
        if ex is not None:
            cases.append(ex)
    return _result(run, "invalid-state-commit", cases, max_examples)


CHECKS = {
    "lost": check_lost,
    "duplicate": check_duplicate,
    "zombie-write": check_zombie,
    "aborted-read": check_aborted_read,
    "committed-in-later-transaction": check_committed_later,
    "premature-commit": check_premature_commit,
    "torn-transaction": check_torn,
    "order": check_order,
    "hanging-transaction": check_hanging,
    "started-below-committed": lambda run, n: check_started_below(run, n),
    "invalid-state-commit": check_invalid_state_commit,
}


def check_eos_py(run_dir: str | os.PathLike[str], *, max_examples: int = 8) -> dict[str, Any]:
    """Every eos check on a run, single-process; input errors raise CheckerInputError."""
    run = parse_run(run_dir)
    checks = {name: (lambda fn=fn: fn(run, max_examples)) for name, fn in CHECKS.items()}
    out = X.run_checks(checks, lambda: check_progress(run, max_examples))
    if run.notes:
        out["input_notes"] = list(run.notes)
    return out
