"""Checks that read only the brokers' log dumps: what Kafka actually stored, not what clients said.

Why a separate family of checks: the history records what clients *believe* happened. The
log dump (``evidence/logdump.jsonl``, written by the substrate's evidence step) holds every
record of every replica with the producer id, producer epoch and transaction markers the brokers
wrote. Zombie writes, misplaced markers and hanging transactions are visible there directly.

Each check is a pure function of a prepared :class:`checkers.logdump.evidence.Evidence` (or of
the dump's DataFrame) returning a result dict shaped like the queue checker's: ``valid``,
``anomalies`` (type -> count), ``bad_anomaly_types``, ``allowed_anomaly_types``, ``examples``
(type -> up to ``max_examples`` cases with every record involved), ``stats`` and ``options``.
Definitions are in ``docs/anomalies.md`` ("Broker log evidence"); :mod:`checkers.logs.pyref`
implements the same checks in plain Python and the tests demand identical results; what both
share (types, reasons, examples, result shape) is :mod:`checkers.logs.rules`.

Public API::

    epoch_violation(ev_or_df, *, transaction_version=None, max_examples=8) -> dict
    replica_divergence(ev_or_df, *, max_examples=8) -> dict
    hanging_in_log(ev_or_df, *, max_examples=8) -> dict
    aborted_in_log(ev_or_df, *, all_replicas=False) -> DataFrame
        # (node, kind, topic, partition, offset, producerId, producerEpoch, isTransactional,
        #  outcome in committed/aborted/open)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from checkers.logdump.evidence import (
    KEY,
    PART,
    Evidence,
    as_evidence,
    resolve_records,
    rows_to_dicts,
)
from checkers.logdump.rules import reference_rank
from checkers.logs import rules as R
from checkers.spark import set_conf
from history.logdump_format import TXN_KINDS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "aborted_in_log",
    "epoch_stats",
    "epoch_violation",
    "hanging_in_log",
    "replica_divergence",
    "tune",
]


#: Extra fields a finding may carry (all nullable in the union of finding types).
_EXTRA = (
    "epoch",
    "prior_epoch",
    "prior_offset",
    "data_epoch",
    "data_offset",
    "first_offset",
    "outcome",
    "prior_outcome",
    "prior_first_offset",
    "prior_marker_offset",
)


# ------------------------------------------------------------------------------------------
# Turning findings into results


def _finish(
    ev: Evidence,
    checker: str,
    counts: dict[str, int],
    chosen: dict[str, list[dict[str, Any]]],
    types: tuple[str, ...],
    stats: dict[str, Any],
    options: dict[str, Any],
) -> dict[str, Any]:
    sels = [s for fs in chosen.values() for f in fs for s in R.selectors(f)]
    resolved = resolve_records(ev, sels)
    examples = {t: [R.example(f, resolved) for f in fs] for t, fs in chosen.items()}
    full_counts = {t: counts.get(t, 0) for t in types}
    return R.result(checker, full_counts, examples, stats, options, considered=types)


def _count_and_top(
    df: DataFrame, max_examples: int
) -> tuple[dict[str, int], dict[str, list[dict[str, Any]]]]:
    """Per type: how many findings, and the first ``max_examples`` in log order
    (log_rules.finding_order), in one job."""
    order = Window.partitionBy("type").orderBy(
        "kind", "topic", "partition", F.coalesce("producerId", F.lit(-2)), "offset"
    )
    rows = (
        df.select(
            "*",
            F.row_number().over(order).alias("_rn"),
            F.count(F.lit(1)).over(Window.partitionBy("type")).alias("_n"),
        )
        .filter(F.col("_rn") <= max(1, max_examples))
        .collect()
    )
    counts: dict[str, int] = {}
    chosen: dict[str, list[dict[str, Any]]] = {}
    for f in sorted(rows_to_dicts(rows), key=R.finding_order):
        counts[f["type"]] = int(f.pop("_n"))
        rn = f.pop("_rn")
        if rn <= max_examples:
            chosen.setdefault(f["type"], []).append(f)
    return counts, chosen


#: Below this many records, Spark's code generation costs more than it saves.
SMALL_DUMP = 1_000_000
_SMALL_CONF = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
}


def tune(spark: SparkSession, rows: int) -> dict[str, str | None]:
    """Settings for one evidence run; returns what to restore afterwards.

    Adaptive execution is off: the checks partition the data once by (kind, topic,
    partition) and rely on Spark seeing that partitioning through the cache, which an
    adaptive plan hides (forcing another shuffle). Small dumps also run interpreted.
    """
    conf = dict(_SMALL_CONF) if rows < SMALL_DUMP else {"spark.sql.adaptive.enabled": "false"}
    # Cached frames live for one run and memory is cheaper than CPU here: skip compression.
    conf["spark.sql.inMemoryColumnarStorage.compressed"] = "false"
    return set_conf(spark, conf)


# ------------------------------------------------------------------------------------------
# epoch_violation


def _epoch_findings(t: DataFrame) -> DataFrame:
    """All epoch findings, one row per (type, replica, record), before merging replicas."""
    ctrl = F.col("isControl")
    txd = ~ctrl & F.col("isTransactional")
    e = F.col("producerEpoch")
    reg = F.col("regression")
    has = F.col("data_n") > 0
    below = ctrl & has & (e < F.col("data_max"))
    types = F.array(
        F.when(~ctrl & reg, F.lit("data-epoch-regression")),
        F.when(
            txd & F.col("prev_data_e").isNotNull() & (e > F.col("prev_data_e")),
            F.lit("epoch-bump-in-open-transaction"),
        ),
        F.when(
            txd
            & (F.col("offset") == F.col("first_offset"))
            & F.col("prev_txn").isNotNull()
            & ~reg
            & (e == F.col("prev_txn.e")),
            F.lit("txn-epoch-reuse"),
        ),
        F.when(below, F.lit("marker-below-data")),
        F.when(ctrl & ~below & reg, F.lit("marker-epoch-regression")),
        F.when(ctrl & has & ~below & ~reg & (e == F.col("data_max")), F.lit("marker-not-bumped")),
        F.when(
            ctrl & ~has & ~reg & F.col("prev_marker").isNotNull() & (F.col("prev_marker.e") == e),
            F.when(F.col("prev_marker.m") == F.col("marker"), F.lit("duplicate-marker")).otherwise(
                F.lit("conflicting-markers")
            ),
        ),
    )
    x = t.select("*", F.filter(types, lambda c: c.isNotNull()).alias("_types"))
    x = x.filter(F.size("_types") > 0).select("*", F.explode("_types").alias("type"))
    ty = F.col("type")

    def when(names: tuple[str, ...], value: Column) -> Column:
        return F.when(ty.isin(*names), value)

    regs = ("data-epoch-regression", "marker-epoch-regression")
    markers = (
        "marker-below-data",
        "marker-epoch-regression",
        "marker-not-bumped",
        "duplicate-marker",
        "conflicting-markers",
    )
    return x.select(
        "type",
        "node",
        "kind",
        "topic",
        "partition",
        "producerId",
        "offset",
        e.alias("epoch"),
        F.coalesce(
            when(regs, F.col("prior.e")),
            when(("epoch-bump-in-open-transaction",), F.col("prev_data_e")),
        ).alias("prior_epoch"),
        F.coalesce(
            when(regs, -F.col("prior.no")),
            when(("duplicate-marker", "conflicting-markers"), F.col("prev_marker.o")),
        ).alias("prior_offset"),
        when(("marker-below-data",), F.col("data_max")).alias("data_epoch"),
        when(("marker-below-data",), -F.col("at_max.no")).alias("data_offset"),
        when(("epoch-bump-in-open-transaction", "marker-not-bumped"), F.col("first_offset")).alias(
            "first_offset"
        ),
        when(markers, F.col("marker")).alias("outcome"),
        when(("duplicate-marker", "conflicting-markers"), F.col("prev_marker.m")).alias(
            "prior_outcome"
        ),
        when(("txn-epoch-reuse",), F.col("prev_txn.f")).alias("prior_first_offset"),
        when(("txn-epoch-reuse",), F.col("prev_txn.m")).alias("prior_marker_offset"),
    )


def _merge_replicas(f: DataFrame) -> DataFrame:
    """One row per case: the lowest node's finding plus every node that shows it."""
    key = ["type", "kind", "topic", "partition", "producerId", "offset"]
    rep = F.min_by(F.struct(*[F.col(c) for c in _EXTRA]), F.col("node"))
    g = f.groupBy(*key).agg(
        rep.alias("rep"),
        F.min("node").alias("node"),
        F.sort_array(F.collect_set("node")).alias("nodes"),
    )
    return g.select(*key, "node", "nodes", *[F.col(f"rep.{c}").alias(c) for c in _EXTRA])


def epoch_stats(ev: Evidence) -> dict[str, Any]:
    """Stats, transaction-version evidence and record outcomes, in one pass over the txn frame.

    Per-replica counts come from the (tiny) replica summary, collected to the driver.
    """
    with ev.lock:
        cached = ev._cache.get("epoch_stats")
        if cached is None:
            cached = ev._cache["epoch_stats"] = _countepoch_stats(ev)
        return cached


def _countepoch_stats(ev: Evidence) -> dict[str, Any]:
    summary = [r.asDict() for r in ev.summary.collect()]
    refs: dict[tuple[str, str, int], int] = {}
    for r in summary:
        key = (r["kind"], r["topic"], r["partition"])
        cur = refs.get(key)
        rank = reference_rank(r["node"], r["max_ple"], r["log_end"])
        if cur is None or rank < reference_rank(cur[0], cur[1], cur[2]):
            refs[key] = (r["node"], r["max_ple"], r["log_end"])  # type: ignore[assignment]
    txn_parts = [r for r in summary if r["kind"] in TXN_KINDS]
    anon_ref = sum(
        r["anon_n"]
        for r in txn_parts
        if refs[(r["kind"], r["topic"], r["partition"])][0] == r["node"]  # type: ignore[index]
    )
    t = ev.txn()
    ctrl, has = F.col("isControl"), F.col("data_n") > 0
    txd = ~ctrl & F.col("isTransactional")
    e, dm = F.col("producerEpoch"), F.col("data_max")
    commit = ctrl & has & (F.col("marker") == "COMMIT")
    ref = F.col("is_ref")
    end = F.col("end_marker")

    def total(c: Column, name: str) -> Column:
        return F.sum(c.cast("long")).alias(name)

    s = t.agg(
        F.countDistinct("producerId").alias("producers"),
        total(commit & (e == dm + 1), "bumped"),
        total(commit & (e == dm), "unbumped"),
        total(ref & commit, "committed"),
        total(ref & ctrl & has & (F.col("marker") == "ABORT"), "aborted"),
        total(ref & ctrl & ~has, "empty_markers"),
        total(ref & txd & end.isNull() & (F.col("offset") == F.col("first_offset")), "open"),
        total(ref & ~ctrl & (~F.col("isTransactional") | (end == "COMMIT")), "out_committed"),
        total(ref & txd & (end == "ABORT"), "out_aborted"),
        total(ref & txd & end.isNull(), "out_open"),
    ).first()

    def n(k: str) -> int:
        return int(s[k] or 0)

    out = {
        "replica_partitions": len(txn_parts),
        "producers": n("producers"),
        "data_records": int(sum(r["data_n"] for r in txn_parts)),
        "markers": int(sum(r["marker_n"] for r in txn_parts)),
        "reference_transactions": {
            "committed": n("committed"),
            "aborted": n("aborted"),
            "open": n("open"),
            "empty_markers": n("empty_markers"),
        },
        "_bumped": n("bumped"),
        "_unbumped": n("unbumped"),
        "_outcomes": {
            "committed": n("out_committed") + int(anon_ref),
            "aborted": n("out_aborted"),
            "open": n("out_open"),
        },
    }
    return out


def epoch_violation(
    data: Evidence | DataFrame,
    *,
    transaction_version: int | str | None = None,
    max_examples: int = 8,
) -> dict[str, Any]:
    """Epoch and marker order per producer per replica partition (docs/anomalies.md)."""
    ev = as_evidence(data)
    st = epoch_stats(ev)
    tv = R.resolve_tv(transaction_version, st["_bumped"], st["_unbumped"])
    cases = _merge_replicas(_epoch_findings(ev.txn()))
    if tv["used"] != 2:
        cases = cases.filter(~F.col("type").isin(*R.TV2_TYPES))
    else:
        # TV2 rules judge only producers seen committing the TV2 way (log_pyref._Scan.tv2_pids):
        # a TV2 broker still serves TV0/1 clients, whose markers keep the epoch.
        t = ev.txn()
        commit = F.col("isControl") & (F.col("data_n") > 0) & (F.col("marker") == "COMMIT")
        tv2 = (
            t.filter(commit & (F.col("producerEpoch") == F.col("data_max") + 1))
            .select("producerId")
            .distinct()
            .withColumn("_tv2", F.lit(True))
        )
        cases = (
            cases.join(F.broadcast(tv2), "producerId", "left")
            .filter(~F.col("type").isin(*R.TV2_TYPES) | F.col("_tv2").isNotNull())
            .drop("_tv2")
        )
    counts, chosen = _count_and_top(cases, max_examples)
    stats = {k: v for k, v in st.items() if not k.startswith("_")}
    stats["transaction_version"] = tv
    options = {"transaction_version": transaction_version, "max_examples": max_examples}
    return _finish(ev, "epoch_violation", counts, chosen, R.EPOCH_TYPES, stats, options)


# ------------------------------------------------------------------------------------------
# replica_divergence


def replica_divergence(data: Evidence | DataFrame, *, max_examples: int = 8) -> dict[str, Any]:
    """Replicas that disagree below the smallest replica log end (docs/anomalies.md)."""
    ev = as_evidence(data)
    per_part = ev.summary.groupBy(*PART).agg(
        F.count(F.lit(1)).alias("replicas"), F.min("log_end").alias("min_end")
    )
    parts = per_part.agg(
        F.count(F.lit(1)).alias("partitions"),
        F.sum((F.col("replicas") >= 2).cast("int")).alias("replicated"),
    ).first()
    repl = per_part.filter(F.col("replicas") >= 2).select(*PART, "min_end")
    node_ple = ev.summary.select(*PART, "node", F.col("max_ple").alias("node_max_ple"))
    rows = (
        ev.base.join(F.broadcast(repl), PART)
        .filter(F.col("offset") < F.col("min_end"))
        .join(F.broadcast(node_ple), [*PART, "node"])
    )
    # One aggregation per offset; each replica's first record (by file order) only.
    g = rows.groupBy(*PART, "offset", "min_end").agg(
        F.array_sort(F.collect_list(F.struct("node", "_row", "fp", "ple", "node_max_ple"))).alias(
            "all"
        )
    )
    first = F.filter(
        "all",
        lambda x, i: F.coalesce(F.get(F.col("all"), i - 1)["node"] != x["node"], F.lit(True)),
    )
    g = g.select(*PART, "offset", "min_end", first.alias("rs")).filter(F.size("rs") >= 2)
    top = F.array_max(F.transform("rs", lambda x: x["ple"]))
    g = g.select("*", top.alias("top"))
    lows = F.filter("rs", lambda x: x["ple"] < F.col("top"))
    g = g.select(
        *PART,
        "offset",
        "min_end",
        "rs",
        F.size(F.array_distinct(F.transform("rs", lambda x: x["fp"]))).alias("variants"),
        F.size(
            F.array_distinct(
                F.transform(F.filter("rs", lambda x: x["ple"] == F.col("top")), lambda x: x["fp"])
            )
        ).alias("top_variants"),
        F.size(lows).alias("n_low"),
        F.forall(lows, lambda x: x["node_max_ple"] < F.col("top")).alias("low_ok"),
    )
    g = g.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        compared = g.count()
        unrec = (F.col("n_low") > 0) & (F.col("top_variants") == 1) & F.col("low_ok")
        nodes = F.transform("rs", lambda x: x["node"])
        cases = g.filter(F.col("variants") >= 2).select(
            F.when(unrec, F.lit("unreconciled-replica"))
            .otherwise(F.lit("replica-divergence"))
            .alias("type"),
            F.array_min(nodes).alias("node"),
            F.array_sort(nodes).alias("nodes"),
            *PART,
            F.lit(None).cast("long").alias("producerId"),
            "offset",
            "variants",
            F.col("min_end").alias("min_log_end"),
            F.map_from_entries(
                F.transform("rs", lambda x: F.struct(x["node"].cast("string"), x["ple"]))
            ).alias("leader_epochs"),
        )
        counts, chosen = _count_and_top(cases, max_examples)
    finally:
        g.unpersist()
    stats = {
        "partitions": int(parts["partitions"] or 0),
        "replicated_partitions": int(parts["replicated"] or 0),
        "compared_offsets": int(compared),
    }
    options = {"max_examples": max_examples}
    return _finish(ev, "replica_divergence", counts, chosen, R.DIVERGENCE_TYPES, stats, options)


# ------------------------------------------------------------------------------------------
# hanging_in_log


def _coordinator_states(ev: Evidence) -> DataFrame:
    """Latest decoded transaction-log state per producer id and the one before it
    (reference replicas only)."""
    schema = (
        "version string, data struct<producerId: long, producerEpoch: int, "
        "transactionStatus: string, transactionPartitions: "
        "array<struct<topic: string, partitionIds: array<int>>>>"
    )
    refs = ev.base.filter((F.col("kind") == "txnlog") & F.col("is_ref")).select(
        "node", "topic", "partition", "offset", "_row"
    )
    tl = ev.full.filter(F.col("kind") == "txnlog").join(
        refs, ["node", "topic", "partition", "offset", "_row"]
    )
    st = tl.select(
        "node",
        "topic",
        "partition",
        "offset",
        "_row",
        F.from_json("payload", schema).alias("v"),
    ).filter(F.col("v.data.producerId").isNotNull() & F.col("v.data.producerEpoch").isNotNull())
    w = Window.partitionBy("v.data.producerId").orderBy(
        F.desc("partition"), F.desc("offset"), "_row"
    )
    ranked = st.select("*", F.row_number().over(w).alias("_k")).filter("_k <= 2")

    def nth(k: int, prefix: str) -> DataFrame:
        return ranked.filter(F.col("_k") == k).select(
            F.col("v.data.producerId").alias("producerId"),
            F.col("v.data.producerEpoch").alias(f"{prefix}_epoch"),
            F.col("v.data.transactionStatus").alias(f"{prefix}_status"),
            F.col("v.data.transactionPartitions").alias(f"{prefix}_parts"),
            F.struct(
                F.col("node").alias("n"),
                F.col("topic").alias("t"),
                F.col("offset").alias("o"),
                F.col("partition").alias("p"),
            ).alias(f"{prefix}_at"),
        )

    # c_*: the latest state; q_*: the one before it (F9's prepare, when it is one).
    return nth(1, "c").join(nth(2, "q"), "producerId", "left")


def hanging_in_log(data: Evidence | DataFrame, *, max_examples: int = 8) -> dict[str, Any]:
    """Transactions left without a marker at the end of a reference replica's log."""
    ev = as_evidence(data)
    t = ev.txn()
    ctrl = F.col("isControl")
    open_seg = ~ctrl & F.col("isTransactional") & F.col("end_marker").isNull() & F.col("is_ref")
    opened = (
        t.filter(open_seg)
        .groupBy(*KEY, "seg")
        .agg(
            F.count(F.lit(1)).alias("data_records"),
            F.max("producerEpoch").alias("epoch"),
            F.min("offset").alias("first_offset"),
            F.max("offset").alias("last_offset"),
        )
    )
    activity = t.groupBy("producerId").agg(
        F.max(F.when(~ctrl, F.col("producerEpoch"))).alias("max_data"),
        F.max(F.when(ctrl, F.col("producerEpoch"))).alias("max_marker"),
    )
    states = _coordinator_states(ev).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        n_states = states.count()
        rows = opened.join(activity, "producerId", "left").join(states, "producerId", "left")
        collected = rows_to_dicts(rows.collect())
    finally:
        states.unpersist()
    findings = []
    for r in collected:
        f: dict[str, Any] = {
            "node": r["node"],
            "kind": r["kind"],
            "topic": r["topic"],
            "partition": r["partition"],
            "producerId": r["producerId"],
            "offset": r["first_offset"],
            "epoch": r["epoch"],
            "first_offset": r["first_offset"],
            "last_offset": r["last_offset"],
            "data_records": r["data_records"],
        }
        state, prior = R.state_from_row(r, "c"), R.state_from_row(r, "q")
        typ, code = R.hanging_reason(r.get("max_data"), r.get("max_marker"), state, f, prior)
        f["type"], f["reason_code"] = typ, code
        if code == "prepared-then-completed" and prior is not None:
            f["prepared"] = R.describe_prepare(prior)
            q = r["q_at"]
            f["prepared_at"] = (q["n"], q["t"], q["o"], q["p"])
        if code == "higher-data-epoch":
            f["later_epoch"] = r["max_data"]
        elif code == "higher-marker-epoch":
            f["later_epoch"] = r["max_marker"]
        if state is not None:
            f["coordinator"] = R.describe_state(state, f["topic"], f["partition"])
            c = r["c_at"]
            f["coordinator_at"] = (c["n"], c["t"], c["o"], c["p"])
        f["nodes"] = [f["node"]]
        findings.append(f)
    counts: dict[str, int] = {}
    for f in findings:
        counts[f["type"]] = counts.get(f["type"], 0) + 1
    chosen = dict(R.top_findings(findings, max_examples)) if max_examples else {}
    stats = {"open_transactions": len(findings), "producers_with_coordinator_state": int(n_states)}
    options = {"max_examples": max_examples}
    return _finish(ev, "hanging_in_log", counts, chosen, R.HANGING_TYPES, stats, options)


# ------------------------------------------------------------------------------------------
# aborted_in_log (a helper for the eos checkers)


def aborted_in_log(data: Evidence | DataFrame, *, all_replicas: bool = False) -> DataFrame:
    """Every data record with its transaction's outcome, from the markers per producer id.

    Columns: node, kind, topic, partition, offset, producerId, producerEpoch, isTransactional,
    outcome ('committed' | 'aborted' | 'open'). A transactional record's outcome is that of the
    first COMMIT/ABORT marker of its producer id after it in the same replica partition; with
    no such marker it is 'open' (a hanging-transaction candidate). Non-transactional records
    are 'committed'. By default only reference replicas: one row per (kind, topic, partition,
    offset), ready to join with the history on (topic, partition, offset).
    """
    ev = as_evidence(data)
    cols = [
        "node",
        "kind",
        "topic",
        "partition",
        "offset",
        "producerId",
        "producerEpoch",
        "isTransactional",
    ]
    t = ev.txn().filter(~F.col("isControl"))
    outcome = (
        F.when(~F.col("isTransactional"), F.lit("committed"))
        .when(F.col("end_marker") == "COMMIT", F.lit("committed"))
        .when(F.col("end_marker") == "ABORT", F.lit("aborted"))
        .otherwise(F.lit("open"))
    )
    producers = t.select("is_ref", *cols, outcome.alias("outcome"))
    anonymous = ev.base.filter(
        F.col("kind").isin(*TXN_KINDS) & ~F.col("isControl") & (F.col("producerId") < 0)
    ).select("is_ref", *cols, F.lit("committed").alias("outcome"))
    out = producers.unionByName(anonymous)
    if not all_replicas:
        out = out.filter(F.col("is_ref"))
    return out.drop("is_ref")


# ------------------------------------------------------------------------------------------
# Running all checks on a run directory
