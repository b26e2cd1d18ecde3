"""What an eos check returns, built the same way by both engines.

Why one module: the Spark engine (:mod:`checkers.eos.checks`, :mod:`checkers.eos.rules`) and
the reference (:mod:`checkers.eos.pyref`) find cases differently, but a case becomes an
example here, a check's result here, a failed check's "unknown" here, and the run's verdict
here. So the tests can demand that both engines' whole results are equal, examples included.
The example shapes are :mod:`checkers.anomalies`' (one :class:`AnomalyType` per check).

An engine builds each example as ``(fields, op indices)`` with the builders below, in the
check's order (the order and limit are part of each check's definition, documented per
builder); :func:`check_result` then fetches the ops once for all examples and fills ``ops``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from checkers.anomalies import EOS, EOS_NOTICES, EOS_PROGRESS, names
from history.eos_records import POISON_PREFIX, input_of
from history.logdump import CheckerInputError

Op = dict[str, Any]
#: An example before its ops are attached: its fields, and the history indices of its ops.
Example = tuple[dict[str, Any], list[int]]

#: The safety checks, in report order; ``progress`` (liveness) is reported apart.
SAFETY_CHECKS: tuple[str, ...] = names(EOS)
#: Checks reported beside them that never make a run invalid (a Kafka bug that costs the
#: client its producer but not exactly-once, like KAFKA-20785).
NOTICE_CHECKS: tuple[str, ...] = names(EOS_NOTICES)
ALL_CHECKS: tuple[str, ...] = SAFETY_CHECKS + NOTICE_CHECKS
_TYPES = {t.name: t for t in (*EOS, *EOS_NOTICES)}
#: The error name a commit refused by KAFKA-20785 is recorded with, by every client.
INVALID_TXN_STATE = "INVALID_TXN_STATE"

#: A drained record: a Spark Row, or the reference's record, indexable by column name.
Row = Any
#: A drained record's fields shown in examples, in this order.
RECORD_COLS = ("topic", "partition", "offset", "key", "value", "headers")


def record(r: Row) -> dict[str, Any]:
    """A drained record (a mapping, or anything indexable by column name) as examples show it."""
    return {k: r[k] for k in RECORD_COLS}


def _position_key(ident: str) -> tuple[int, ...]:
    return tuple(int(x) for x in ident.split("/"))


def ident_order(ident: str) -> tuple[int, int, str]:
    """The order of input identities: known positions ``"p/o"`` first, then ``"v:<value>"``."""
    if ident.startswith("v:"):
        return (1 << 62, 0, ident)
    p, o = _position_key(ident)
    return (p, o, "")


# ------------------------------------------------------------------------------------------
# One builder per anomaly type. Each documents the order its check lists examples in.


def lost(
    value: str,
    src_p: int,
    src_o: int,
    committed: int | None,
    idx: list[int],
    *,
    written: list[dict[str, Any]] | None = None,
    log: dict[str, Any] | None = None,
) -> Example:
    """By (input partition, offset, send op index). Ops: the seed's send, the offsets op.
    ``written``: :func:`written_outputs` of the transactions that read it; ``log``: the
    evidence of the output position :func:`evidence_target` picks among them."""
    ex: dict[str, Any] = {"values": [value], "input": [src_p, src_o], "committed_offset": committed}
    if written is not None:
        ex["written"] = written
    if log is not None:
        ex["log"] = log
    return ex, idx


#: A transaction that read an input: (instance, seq, completion type or None, invoke op
#: index, completion op index or None).
Writer = tuple[int, int, str | None, int, int | None]


def _output_of(op: Mapping[str, Any] | None, src: tuple[int, int]) -> list[Any] | None:
    """Where a ``txn`` completion says the output of input ``src`` went: [partition, offset]
    (either may be null: no delivery report), or None if it lists no such output."""
    v = (op or {}).get("value")
    for item in (v.get("outputs") or []) if isinstance(v, Mapping) else []:
        if not isinstance(item, list) or len(item) < 5 or None in (item[3], item[4]):
            continue
        if (int(item[3]), int(item[4])) == src:
            return [item[0], item[1]]
    return None


def written_outputs(
    src: tuple[int, int], writers: Iterable[Writer], ops: Mapping[int, Op]
) -> list[dict[str, Any]]:
    """Every transaction that read input ``src``, in history order, with its outcome and the
    output position its completion reports: ``{"txn", "outcome", "output"}``.

    Why: a lost input's journey should say where the brokers were told its output went, so
    the log can be asked what is there now. ``ops``: the completions by history index.
    """
    out = []
    for inst, seq, outcome, _inv, done in sorted(set(writers), key=lambda w: w[3]):
        output = _output_of(ops.get(done) if done is not None else None, src)
        out.append({"txn": [inst, seq], "outcome": outcome, "output": output})
    return out


def evidence_target(written: list[dict[str, Any]]) -> tuple[int, int] | None:
    """The output position whose broker-log evidence an example shows: the committed
    (``ok``) writer's if it has a known offset, else the last writer's with one."""
    known = [
        w for w in written
        if w.get("output") and w["output"][0] is not None and w["output"][1] is not None
    ]  # fmt: skip
    ok = [w for w in known if w.get("outcome") == "ok"]
    pick = ok[0] if ok else (known[-1] if known else None)
    return None if pick is None else (int(pick["output"][0]), int(pick["output"][1]))


def torn_output_positions(dones: Iterable[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """Every output position the given ``txn`` completions report: what a torn transaction's
    example may need the broker log's evidence of (fetched in one go by each engine)."""
    out = set()
    for op in dones:
        v = op.get("value")
        for item in (v.get("outputs") or []) if isinstance(v, Mapping) else []:
            if isinstance(item, list) and len(item) >= 2 and None not in (item[0], item[1]):
                out.add((int(item[0]), int(item[1])))
    return sorted(out)


def missing_outputs(done: Mapping[str, Any] | None, missing: list[str]) -> list[dict[str, Any]]:
    """For a torn transaction: where its completion says each missing input's output went,
    ``{"input": "p/o", "output": [partition, offset] | None}``, in the order of ``missing``."""
    out = []
    for ident in missing:
        p, o = _position_key(ident)
        out.append({"input": ident, "output": _output_of(done, (p, o))})
    return out


def duplicate(ident: str, copies: list[Row], idx: list[int]) -> Example:
    """By :func:`ident_order`. ``copies``: the drained records with their ``in_value``, in any
    order (shown by output position). Ops: every copy's transaction (invoke, completion)."""
    rs = sorted(copies, key=lambda r: (r["partition"], r["offset"]))
    ex = {
        "values": [rs[0]["in_value"]],
        "input": ident,
        "copies": len(rs),
        "records": [record(r) for r in rs],
    }
    return ex, idx


def zombie_write(
    in_value: str | None,
    rec: Row,
    idx: list[int],
    *,
    fence_index: int | None = None,
    newer: tuple[int, int, int] | None = None,
) -> Example:
    """By output (partition, offset). Fenced (``fence_index``: the fencing op, shown among the
    ops) wins over overtaken (``newer``: generation, instance, smallest source offset)."""
    ex: dict[str, Any] = {"values": [in_value], "records": [record(rec)]}
    if fence_index is not None:
        ex["reason"] = "fenced"
        return ex, [*idx, fence_index]
    if newer is None:
        raise ValueError("a zombie write is fenced or overtaken")
    g, i, m = newer
    ex["reason"] = "overtaken"
    ex["newer"] = {"generation": g, "instance": i, "min_src_offset": m}
    return ex, idx


def aborted_read(
    values: list[str | None],
    kind: str,
    rec: Row | None,
    idx: list[int],
    log: dict[str, Any] | None = None,
) -> Example:
    """Drained records by output (partition, offset), then poison inputs by transaction
    (instance, seq); a poison input's ``values`` are its poison values in input order.
    ``log``: the record's broker-log evidence (:func:`checkers.logs.rules.position_evidence`),
    for the ``*-in-log`` kinds."""
    ex: dict[str, Any] = {"values": list(values), "kind": kind}
    if rec is not None:
        ex["records"] = [record(rec)]
    if log is not None:
        ex["log"] = log
    return ex, idx


def committed_later(
    in_value: str | None,
    kind: str,
    txn: tuple[int, int],
    outcome: str | None,
    rec: Row,
    idx: list[int],
    *,
    later: tuple[int, int, str | None] | None = None,
    later_idx: list[int] | None = None,
    log: dict[str, Any] | None = None,
) -> Example:
    """By output (partition, offset). ``txn``/``outcome``: the writer transaction its headers
    name and how the history says it ended (``fail``, ``info``, ``ok``, None: no completion);
    ``later``: (instance, seq, outcome) of the latest writer transaction among the records
    the same marker committed, when it is another one. Ops: the writer's invoke and
    completion, then the later transaction's."""
    ex: dict[str, Any] = {
        "values": [in_value],
        "kind": kind,
        "txn": list(txn),
        "outcome": outcome,
        "records": [record(rec)],
    }
    if later is not None:
        ex["later"] = {"txn": [later[0], later[1]], "outcome": later[2]}
    if log is not None:
        ex["log"] = log
    return ex, [*idx, *(later_idx or [])]


def premature_commit(
    in_value: str | None,
    txn: tuple[int, int],
    rec: Row,
    idx: list[int],
    *,
    marker_ms: int,
    failed_ms: int,
    log: dict[str, Any] | None = None,
) -> Example:
    """By output (partition, offset). ``txn``: the failed writer transaction its headers
    name; ``marker_ms``/``failed_ms``: when the broker wrote the COMMIT marker that ended it
    and when the client recorded the failure (epoch ms). Ops: the writer's invoke and
    completion."""
    ex: dict[str, Any] = {
        "values": [in_value],
        "kind": "commit-before-failure",
        "txn": list(txn),
        "outcome": "fail",
        "records": [record(rec)],
        "marker_ms": int(marker_ms),
        "failed_ms": int(failed_ms),
        "early_ms": int(failed_ms) - int(marker_ms),
    }
    if log is not None:
        ex["log"] = log
    return ex, idx


def torn_transaction(
    txn: tuple[int, int],
    kind: str,
    inputs: Iterable[tuple[Any, Any, str]],
    have: set[str],
    idx: list[int],
    *,
    done: Mapping[str, Any] | None = None,
    log_of: Callable[[tuple[int, int]], dict[str, Any] | None] | None = None,
) -> Example:
    """By (instance, seq). ``inputs``: the invoke's ``[p, o, value]``; ``have``: identities of
    that transaction's drained records. Values by input position, each position once.
    ``done``: its completion op, for where the missing outputs went (``written``); ``log_of``:
    the broker-log evidence of an output position (first missing output with one: ``log``)."""
    items: dict[str, str] = {}
    for p, o, v in inputs:
        items.setdefault(f"{int(p)}/{int(o)}", v)
    order = sorted(items, key=_position_key)
    ex = {
        "values": [items[i] for i in order],
        "kind": kind,
        "txn": list(txn),
        "expected": len(order),
        "present": sum(1 for i in order if i in have),
        "missing": [i for i in order if i not in have],
    }
    if done is not None:
        ex["written"] = missing_outputs(done, ex["missing"])
        for w in ex["written"]:
            out = w["output"]
            if log_of is not None and out and out[0] is not None and out[1] is not None:
                log = log_of((int(out[0]), int(out[1])))
                if log is not None:
                    ex["log"] = log
                    break
    return ex, idx


def order(output_partition: int, src_partition: int, prev: Row, cur: Row) -> Example:
    """By output (partition, offset) of the later record; no ops (records say it all)."""
    ex = {
        "values": [prev["in_value"], cur["in_value"]],
        "output_partition": output_partition,
        "src_partition": src_partition,
        "records": [record(prev), record(cur)],
    }
    return ex, []


#: How long past its timeout a transaction may stay open before it counts as stuck: Kafka's
#: coordinator looks for timed-out transactions every
#: ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` (default 10 s, which the
#: harness keeps), then writes the abort markers.
ABORT_SWEEP_MS = 10_000


def transaction_timeout_ms(header: Mapping[str, Any] | None) -> int | None:
    """The run's ``transaction.timeout.ms`` from a merged history header, if it names one.

    The harness writes the workload's options under ``meta.workload_options`` (older runs:
    ``meta.eos``); see docs/history-format.md, "Workload eos".
    """
    meta = (header or {}).get("meta")
    if not isinstance(meta, Mapping):
        return None
    for key in ("workload_options", "eos"):
        opts = meta.get(key)
        if isinstance(opts, Mapping):
            v = opts.get("transaction_timeout_ms")
            if isinstance(v, int) and not isinstance(v, bool):
                return v
    return None


@dataclass(frozen=True)
class Watched:
    """One partition a final ``watermarks`` op reports with ``lso < hwm``."""

    index: int  # the op's history index
    pos: int  # the partition's position in the op
    time: int  # the op's monotonic time (ns)
    topic: str
    partition: int
    lso: int
    hwm: int


@dataclass(frozen=True)
class HangingRow:
    """One row of a final ``find-hanging`` op (``pos``: its position among the op's rows)."""

    index: int
    pos: int
    broker: int | None
    row: Mapping[str, Any]

    def place(self) -> tuple[str | None, int | None]:
        """The (topic, partition) the row names (Kafka prints them as text)."""
        topic, part = self.row.get("Topic"), self.row.get("Partition")
        try:
            return topic, None if part is None else int(part)
        except (TypeError, ValueError):
            return topic, None


def hanging_cases(
    watched: list[Watched],
    rows: list[HangingRow],
    *,
    watched_topics: set[str],
    find_hanging_ran: bool,
    last_write: int | None,
    timeout_ms: int | None,
) -> list[tuple[tuple[int, int], Watched | HangingRow, dict[str, Any]]]:
    """Every hanging case in check order (op index, position in the op), with the fields
    that say how sure it is: for a stuck LSO, how long every client had been quiet when
    the watermarks were read (``quiet_ms``: since the last op of any processor or of the
    seeder, the only transactional writers), whether that is past the transaction timeout
    plus the coordinator's abort sweep, and which brokers' ``find-hanging`` list the same
    partition; for a ``find-hanging`` row, whether the watermarks show that partition stuck.

    Both engines hand over *every* case (there are at most a few per partition), so the
    cross-references are computed once, here.
    """
    stuck = {(w.topic, w.partition) for w in watched}
    named: dict[tuple[str | None, int | None], list[int]] = {}
    for r in rows:
        if r.broker is not None:
            named.setdefault(r.place(), []).append(r.broker)
    out: list[tuple[tuple[int, int], Watched | HangingRow, dict[str, Any]]] = []
    for w in watched:
        quiet = None if last_write is None else (w.time - last_write) // 1_000_000
        past = None
        if quiet is not None and timeout_ms is not None:
            past = quiet > timeout_ms + ABORT_SWEEP_MS
        f: dict[str, Any] = {"quiet_ms": quiet, "timeout_ms": timeout_ms, "past_timeout": past}
        if find_hanging_ran:
            f["find_hanging"] = sorted(set(named.get((w.topic, w.partition), [])))
        out.append(((w.index, w.pos), w, f))
    for r in rows:
        g: dict[str, Any] = {}
        topic, part = r.place()
        if topic in watched_topics:
            g["lso_below_hwm"] = (topic, part) in stuck
        out.append(((r.index, r.pos), r, g))
    out.sort(key=lambda c: c[0])
    return out


def logged_value(log: Mapping[str, Any] | None, offset: int) -> list[str]:
    """The input value of the data record at ``offset`` in a position's evidence, if any:
    what a stuck LSO's example names, so the report can follow it (the transaction that wrote
    it, the faults around it)."""
    for r in (log or {}).get("records") or []:
        if r.get("offset") == offset and not r.get("isControl"):
            payload = r.get("payload")
            if isinstance(payload, str):
                v = input_of(payload)
                if v is not None or payload.startswith(POISON_PREFIX):
                    return [v if v is not None else payload]
    return []


def lso_below_hwm(w: Watched, fields: dict[str, Any], log: dict[str, Any] | None) -> Example:
    """Hanging transactions by (op index, position in the op). Ops: the watermarks op.
    ``fields``: from :func:`hanging_cases`; ``log``: the evidence of the record at the LSO
    (the first record of the oldest open transaction), when the run has a dump."""
    ex = {"values": logged_value(log, w.lso), "kind": "lso-below-hwm", "topic": w.topic}
    ex |= {"partition": w.partition, "lso": w.lso, "hwm": w.hwm} | fields
    if log is not None:
        ex["log"] = log
    return ex, [w.index]


def find_hanging_row(r: HangingRow, fields: dict[str, Any]) -> Example:
    """Like :func:`lso_below_hwm`; ops: the find-hanging op."""
    ex = {"values": [], "kind": "find-hanging", "broker": r.broker, "row": dict(r.row)}
    return ex | fields, [r.index]


# ------------------------------------------------------------------------------------------
# Results


def check_result(
    name: str, count: int, made: list[Example], ops_of: Callable[[list[int]], dict[int, Op]]
) -> dict[str, Any]:
    """A safety check's result: the verdict, the count, the examples with their ops.

    ``ops_of`` maps history indices to the full ops (called once, for every example).
    """
    t = _TYPES[name]
    ops = ops_of(sorted({i for _ex, idx in made for i in idx}))
    examples = [
        t.example_of(ex | {"ops": [ops[i] for i in sorted(set(idx)) if i in ops]})
        for ex, idx in made
    ]
    if t.allowed:  # a notice: counted and shown, valid whatever it finds
        counted = {name: count} if count else {}
        return {"valid": True, "count": count, "anomalies": counted, "examples": examples}
    return {"valid": count == 0, "count": count, "examples": examples}


def invalid_state_commit(instance: int, seq: int, error: Any, idx: list[int]) -> Example | None:
    """The ``invalid-state-commit`` example of an ``info`` transaction whose commit was refused
    with INVALID_TXN_STATE (None for any other outcome): both engines find the ``info``
    completions, this decides which of them count."""
    if not isinstance(error, dict) or error.get("stage") != "commit":
        return None
    if error.get("code") != INVALID_TXN_STATE:
        return None
    fields = {"values": [], "instance": instance, "txn_seq": seq, "code": INVALID_TXN_STATE}
    return fields | {"message": str(error.get("message") or "")}, idx


def progress_result(
    drain_type: str | None,
    unread: list[int],
    unconsumed: int,
    first: list[tuple[str, int, int, int | None]],
) -> dict[str, Any]:
    """Liveness: ``first`` are the first unconsumed seeds ``(value, p, o, committed)`` by
    (input partition, offset, send op index)."""
    ok = drain_type == "ok" and not unread and unconsumed == 0
    return {
        "valid": ok,
        "drain": drain_type,
        "incomplete_reads": unread,
        "unconsumed": unconsumed,
        "count": unconsumed + len(unread) + (0 if drain_type == "ok" else 1),
        "examples": [
            EOS_PROGRESS.make(values=[v], input=[p, o], committed_offset=c) for v, p, o, c in first
        ],
    }


def unknown(error: str) -> dict[str, Any]:
    """The one shape of a check that could not run: never valid, no count, the error."""
    return {"valid": "unknown", "count": 0, "examples": [], "error": error}


def error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def combine_eos(results: dict[str, dict[str, Any]], liveness: dict[str, Any]) -> dict[str, Any]:
    """Safety verdict: false if any check failed, unknown if any could not run, else true."""
    valids = [r.get("valid") for k, r in results.items() if k not in NOTICE_CHECKS]
    valid: bool | str = False if False in valids else ("unknown" if "unknown" in valids else True)
    anomalies = {k: int(r.get("count", 0)) for k, r in results.items() if r.get("valid") is False}
    for r in results.values():
        anomalies |= r.get("anomalies") or {}  # a notice's count
    return {"valid": valid, "anomalies": anomalies, "checkers": results, "liveness": liveness}


def all_unknown(error: str) -> dict[str, Any]:
    """The verdict when no check could run at all (every check and liveness unknown)."""
    return combine_eos({k: unknown(error) for k in ALL_CHECKS}, unknown(error))


def run_checks(
    checks: Mapping[str, Callable[[], dict[str, Any]]],
    progress: Callable[[], dict[str, Any]],
    describe: Callable[[BaseException], str] = error_text,
    workers: int = 1,
) -> dict[str, Any]:
    """Run every check and the liveness check, each guarded the same way, ``workers`` at a
    time (the Spark checks are many small queries, each mostly one core of planning).

    Unusable input (:class:`CheckerInputError`) is raised; any other exception makes that
    one check :func:`unknown` (never valid) and leaves the others to run.
    """
    jobs = {name: checks[name] for name in ALL_CHECKS} | {"": progress}
    if workers <= 1:
        done = {name: _guarded(fn, describe) for name, fn in jobs.items()}
    else:
        with ThreadPoolExecutor(workers, thread_name_prefix="eos-check") as pool:
            futures = {name: pool.submit(_guarded, fn, describe) for name, fn in jobs.items()}
        done = {name: f.result() for name, f in futures.items()}
    liveness = done.pop("")
    return combine_eos(done, liveness)


def _guarded(fn: Callable[[], dict[str, Any]], describe: Callable[[BaseException], str]) -> dict:
    try:
        return fn()
    except CheckerInputError:
        raise
    except Exception as e:
        return unknown(describe(e))


__all__ = [
    "ABORT_SWEEP_MS",
    "ALL_CHECKS",
    "INVALID_TXN_STATE",
    "NOTICE_CHECKS",
    "RECORD_COLS",
    "SAFETY_CHECKS",
    "Example",
    "HangingRow",
    "Watched",
    "all_unknown",
    "check_result",
    "combine_eos",
    "hanging_cases",
    "ident_order",
    "invalid_state_commit",
    "progress_result",
    "record",
    "run_checks",
    "transaction_timeout_ms",
    "unknown",
]
