"""What both engines of the broker-log checks share: the rules that are not the scan itself.

Why a module of its own: the Spark engine (:mod:`checkers.logs.checks`) and the reference
(:mod:`checkers.logs.pyref`) must give identical results, so everything that is not the
per-producer state machine lives here once: how an open
transaction is classified, the sentence that explains a finding, which records an example
shows (selectors), the order and limit of examples, and the result shape. Nothing here needs
Spark (pyspark is an optional extra). The anomaly types are :mod:`checkers.anomalies`'.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any, Final

from checkers.anomalies import LOG_CHECKERS, LOG_EVIDENCE, log_types
from checkers.logdump.rules import Selector
from history.logdump import TXN_STATUS

EPOCH_TYPES: Final = log_types("epoch_violation")
DIVERGENCE_TYPES: Final = log_types("replica_divergence")
HANGING_TYPES: Final = log_types("hanging_in_log")
#: Only judged when the log is (or is said to be) written with transaction version 2.
TV2_TYPES: Final = frozenset(
    ("marker-not-bumped", "txn-epoch-reuse", "conflicting-markers", "duplicate-marker")
)
#: Reported with examples but not a reason to call the log invalid (see docs/anomalies.md).
ALLOWED_TYPES: Final = frozenset(t.name for t in LOG_EVIDENCE if t.allowed)

IN_FLIGHT_STATES: Final = frozenset(
    ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")
)
#: A prepare and the completion it must be followed by.
COMPLETES: Final = {"PrepareCommit": "CompleteCommit", "PrepareAbort": "CompleteAbort"}

CHECKERS: Final = LOG_CHECKERS
#: Log-evidence type names are unique across its checkers.
_TYPES: Final = {t.name: t for t in LOG_EVIDENCE}


def coordinator_in_flight(
    state: dict[str, Any] | None, topic: str, partition: int, epoch: int
) -> bool:
    """Does the coordinator's latest state say this partition is in an unfinished transaction?"""
    return (
        state is not None
        and state["status"] in IN_FLIGHT_STATES
        and (topic, partition) in state["partitions"]
        and state["producerEpoch"] in (epoch, epoch + 1)
    )


def marker_skipped(
    state: dict[str, Any] | None, prior: dict[str, Any] | None, topic: str, part: int, epoch: int
) -> bool:
    """Finding F9's shape: the coordinator's last two states of the producer are a prepare
    that listed this partition at this transaction's epoch (TV0/1: the data's; TV2: one
    above) and the completion of that prepare, so the coordinator finished the transaction
    though this partition holds no marker for it. The latest state being that completion
    rules out a later transaction of the same producer (it would have written ``Ongoing``
    with its partitions before its data could be appended)."""
    return (
        state is not None
        and prior is not None
        and COMPLETES.get(prior["status"]) == state["status"]
        and (topic, part) in prior["partitions"]
        and prior["producerEpoch"] in (epoch, epoch + 1)
    )


def hanging_reason(
    max_data_any: int | None,
    max_marker_any: int | None,
    state: dict[str, Any] | None,
    f: dict,
    prior: dict[str, Any] | None = None,
) -> tuple[str, str]:
    """Classify an open transaction: (type, reason code). Shared so both sides agree.
    ``prior``: the coordinator's state of the producer before ``state``, its latest."""
    e = f["epoch"]
    if marker_skipped(state, prior, f["topic"], f["partition"], e):
        return "marker-skipped", "prepared-then-completed"
    if max_data_any is not None and max_data_any > e:
        return "hanging-transaction", "higher-data-epoch"
    if max_marker_any is not None and max_marker_any > e + 1:
        return "hanging-transaction", "higher-marker-epoch"
    if state is not None:
        if coordinator_in_flight(state, f["topic"], f["partition"], e):
            return "open-transaction", "coordinator-in-flight"
        return "hanging-transaction", "coordinator-moved-on"
    return "open-transaction", "no-coordinator-state"


def reason(f: dict[str, Any]) -> str:
    """One sentence explaining a finding, built from its fields only."""
    t = f["type"]
    pid = f.get("producerId")
    if t == "data-epoch-regression":
        return (
            f"producer {pid} wrote data at epoch {f['epoch']} after epoch {f['prior_epoch']} "
            f"(offset {f['prior_offset']}) on this replica: a fenced (zombie) write"
        )
    if t == "marker-epoch-regression":
        return (
            f"{f['outcome']} marker of producer {pid} at epoch {f['epoch']} after epoch "
            f"{f['prior_epoch']} (offset {f['prior_offset']})"
        )
    if t == "marker-below-data":
        return (
            f"{f['outcome']} marker at epoch {f['epoch']} ends a transaction holding data at "
            f"epoch {f['data_epoch']} (offset {f['data_offset']})"
        )
    if t == "epoch-bump-in-open-transaction":
        return (
            f"producer {pid} wrote data at epoch {f['epoch']} while its transaction at epoch "
            f"{f['prior_epoch']} (from offset {f['first_offset']}) had no marker"
        )
    if t == "marker-not-bumped":
        return (
            f"TV2: {f['outcome']} marker at epoch {f['epoch']} ends a transaction written at "
            f"epoch {f['epoch']}; the coordinator must bump the epoch"
        )
    if t == "txn-epoch-reuse":
        return (
            f"TV2: transaction at epoch {f['epoch']} reuses the epoch of the transaction ended "
            f"by the marker at offset {f['prior_marker_offset']}"
        )
    if t in ("conflicting-markers", "duplicate-marker"):
        return (
            f"TV2: {f['outcome']} marker at epoch {f['epoch']} follows the {f['prior_outcome']} "
            f"marker at offset {f['prior_offset']} with the same epoch and no data between"
        )
    if t in ("hanging-transaction", "open-transaction", "marker-skipped"):
        code = f["reason_code"]
        head = (
            f"{f['data_records']} record(s) of producer {pid} at epoch {f['epoch']} "
            f"(offsets {f['first_offset']}..{f['last_offset']}) have no marker"
        )
        if code == "higher-data-epoch":
            tail = f"; the producer later wrote data at epoch {f['later_epoch']}"
        elif code == "higher-marker-epoch":
            tail = (
                f"; a marker of epoch {f['later_epoch']} shows the coordinator moved past "
                "this epoch"
            )
        elif code == "prepared-then-completed":
            prepared = f["prepared"]
            tail = (
                f"; the coordinator's {prepared} listed this partition and its next state "
                f"completed the transaction ({COMPLETES[prepared.split()[0]]}) with no marker "
                "here: the marker was skipped (finding F9)"
            )
        elif code == "coordinator-moved-on":
            tail = (
                f"; the coordinator's latest state ({f['coordinator']}) does not cover this "
                "partition at this epoch"
            )
        elif code == "coordinator-in-flight":
            tail = f"; the coordinator's latest state ({f['coordinator']}) still has it in progress"
        else:
            tail = (
                "; no coordinator state in the dump and no later epoch: possibly in flight "
                "when the brokers stopped"
            )
        return head + tail
    if t in ("replica-divergence", "unreconciled-replica"):
        base = (
            f"{f['variants']} different records at offset {f['offset']} (below the smallest "
            f"replica log end {f['min_log_end']})"
        )
        if t == "unreconciled-replica":
            return base + "; the disagreeing replica never fetched from the newer leader"
        return base
    return t


def selectors(f: dict[str, Any]) -> list[Selector]:
    """The records an example shows, as selectors into the finding's representative replica."""
    t, node, k, tp, p = f["type"], f["node"], f["kind"], f["topic"], f["partition"]
    pid, off = f.get("producerId"), f["offset"]

    def at(o: int, n: int = node, kind: str = k, topic: str = tp, part: int = p) -> Selector:
        return ("at", n, kind, topic, part, o)

    def rng(lo: int, hi: int) -> Selector:
        return ("range", node, k, tp, p, pid, lo, hi)

    if t in ("data-epoch-regression", "marker-epoch-regression"):
        return [at(f["prior_offset"]), at(off)]
    if t == "marker-below-data":
        return [at(f["data_offset"]), at(off)]
    if t == "epoch-bump-in-open-transaction":
        return [rng(f["first_offset"], off)]
    if t == "marker-not-bumped":
        return [rng(f["first_offset"], off), at(off)]
    if t == "txn-epoch-reuse":
        return [
            rng(f["prior_first_offset"], f["prior_marker_offset"]),
            at(f["prior_marker_offset"]),
            at(off),
        ]
    if t in ("conflicting-markers", "duplicate-marker"):
        return [at(f["prior_offset"]), at(off)]
    if t in ("hanging-transaction", "open-transaction", "marker-skipped"):
        sel = [rng(f["first_offset"], f["last_offset"])]
        for c in (f.get("prepared_at"), f.get("coordinator_at")):
            if c is not None:
                sel.append(at(c[2], n=c[0], kind="txnlog", topic=c[1], part=c[3]))
        return sel
    if t in ("replica-divergence", "unreconciled-replica"):
        return [at(off, n=n) for n in f["nodes"]]
    raise ValueError(t)


def example(f: dict[str, Any], resolved: dict[Selector, tuple[list[dict], int]]) -> dict[str, Any]:
    """A finding as shown to a reader: its fields, a reason, and the records involved."""
    out = {k: v for k, v in f.items() if k not in ("node", "coordinator_at")}
    out["reason"] = reason(f)
    records: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    omitted = 0
    for s in selectors(f):
        recs, om = resolved.get(s, ([], 0))
        omitted += om
        for r in recs:
            ident = (r["node"], r["kind"], r["topic"], r["partition"], r["offset"])
            if ident not in seen:
                seen.add(ident)
                records.append(r)
    out["records"] = records
    if omitted:
        out["records_omitted"] = omitted
    return _TYPES[f["type"]].example_of(out)


def finding_order(f: dict[str, Any]) -> tuple[Any, ...]:
    """Examples are shown in log order: by partition, producer, offset."""
    pid = f.get("producerId")
    return (f["kind"], f["topic"], f["partition"], -2 if pid is None else pid, f["offset"])


def finding_key(f: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two replicas' findings the same case."""
    return (f["type"], f["kind"], f["topic"], f["partition"], f.get("producerId"), f["offset"])


def merge_replicas(findings: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One case per finding key: the lowest node's finding, with every node that shows it."""
    by_key: dict[tuple[Any, ...], dict[str, Any]] = {}
    nodes: dict[tuple[Any, ...], set[int]] = defaultdict(set)
    for f in findings:
        key = finding_key(f)
        nodes[key].add(f["node"])
        cur = by_key.get(key)
        if cur is None or f["node"] < cur["node"]:
            by_key[key] = f
    out = []
    for key, f in by_key.items():
        g = dict(f)
        if "nodes" not in g:
            g["nodes"] = sorted(nodes[key])
        out.append(g)
    return out


def result(
    checker: str,
    counts: dict[str, int],
    examples: dict[str, list[dict[str, Any]]],
    stats: dict[str, Any],
    options: dict[str, Any],
    *,
    considered: Iterable[str],
) -> dict[str, Any]:
    """The common result shape (same keys as the queue checker's)."""
    counts = {t: n for t, n in sorted(counts.items()) if n}
    bad = sorted(t for t in counts if t not in ALLOWED_TYPES)
    return {
        "checker": checker,
        "valid": not bad,
        "anomalies": counts,
        "anomaly_types": list(counts),
        "bad_anomaly_types": bad,
        "allowed_anomaly_types": sorted(ALLOWED_TYPES & set(considered)),
        "examples": {t: examples[t] for t in counts if examples.get(t)},
        "options": options,
        "stats": stats,
    }


def resolve_tv(transaction_version: int | str | None, bumped: int, unbumped: int) -> dict[str, Any]:
    """Which rules apply: an explicit version, or TV2 when commits carry bumped epochs.

    Detection counts transactions with data that a COMMIT marker ends: under TV2 the marker
    carries the transaction's epoch + 1 (and the next transaction writes at that epoch); under
    TV0/1 it carries the transaction's own epoch. Aborts are not counted, because TV0 bumps the
    epoch when the coordinator aborts on timeout or fences a producer.
    """
    ev = {"bumped_commits": bumped, "unbumped_commits": unbumped}
    if transaction_version in (None, "detect", "auto"):
        tv = 2 if bumped > unbumped else 0
        return {"used": tv, "source": "detected", "evidence": ev}
    if transaction_version not in (0, 1, 2):
        raise ValueError(
            f"transaction_version must be 0, 1, 2 or None, not {transaction_version!r}"
        )
    return {"used": int(transaction_version), "source": "argument", "evidence": ev}


def top_findings(findings: list[dict[str, Any]], n: int) -> dict[str, list[dict[str, Any]]]:
    """Per type, the first ``n`` findings in log order."""
    by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f in sorted(findings, key=finding_order):
        if len(by_type[f["type"]]) < n:
            by_type[f["type"]].append(f)
    return by_type


def describe_prepare(st: dict[str, Any]) -> str:
    """The prepare state a ``marker-skipped`` finding names (``prepared``)."""
    return f"{st['status']} at epoch {st['producerEpoch']}"


def describe_state(st: dict[str, Any], topic: str, part: int) -> str:
    cover = "covers" if (topic, part) in st["partitions"] else "does not cover"
    return f"{st['status']} at epoch {st['producerEpoch']}, {cover} this partition"


def state_from_row(r: dict[str, Any], prefix: str) -> dict[str, Any] | None:
    """A Spark row's coordinator state (``c``: latest, ``q``: the one before), as a dict, decoded
    as :func:`history.logdump.parse_txn_state` decodes it; None when the row has none."""
    if r.get(f"{prefix}_epoch") is None:
        return None
    parts = []
    for tp in r.get(f"{prefix}_parts") or []:
        if tp.get("topic") is not None:
            parts += [(tp["topic"], p) for p in tp.get("partitionIds") or [] if p is not None]
    status = r.get(f"{prefix}_status")
    return {
        "producerId": r["producerId"],
        "producerEpoch": r[f"{prefix}_epoch"],
        "status": TXN_STATUS.get(status or "", status),
        "partitions": parts,
    }
