"""The ``eos`` checker: exactly-once anomalies of a consume-transform-produce run, in Spark.

Why Spark: a long run under faults holds millions of seeded values and drained outputs; every
check here is a join or aggregation over DataFrames built by :mod:`checkers.eos_frames`, so it
scales past one machine's memory. :mod:`checkers.eos_pyref` is the same set of definitions in
plain Python, and the tests require both to agree. Definitions: ``docs/anomalies.md``,
"eos workload". Each check is a pure function of the stored run (history plus, if present,
the broker log dump); nothing talks to Kafka.

Public API::

    check_eos(run_dir, spark=None, max_examples=8) -> dict
        {"valid": bool | "unknown", "anomalies": {type: count},
         "checkers": {name: {"valid", "count", "examples"}}, "liveness": {...}}

A malformed history raises :class:`checkers.load.CheckerInputError` (one line). A Spark
failure, or an exception inside one check, makes that check ``valid: "unknown"``, never true.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers import eos_results as X
from checkers import eos_rules
from checkers.eos_frames import EosFrames, ops_at
from checkers.eos_log import EosLog, Where, defer_log, run_log
from checkers.eos_results import RECORD_COLS, Example
from checkers.eos_rules import (
    committed_of,
    ident_of,
    ident_table,
    readable,
    result,
    txn_idx,
)
from checkers.eos_views import build
from checkers.load import CheckerInputError, Loaded, history_path, load_history, logdump_path
from checkers.spark import restore_conf, set_conf, spark_error, spark_session

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import Column, SparkSession

__all__ = ["CHECKS", "CheckerInputError", "check_eos", "eos_checks"]


def check_lost(
    fr: EosFrames, max_examples: int, spark: SparkSession, run_dir: Path
) -> dict[str, Any]:
    """Acknowledged seeds below the group's committed offset with no committed output.

    Each example also says which transactions read the seed and where their completions say
    its output went (``written``), and, with a dump, what the log holds there (``log``).
    """
    committed = committed_of(fr, F.col("src_p"))
    lost = (
        ident_table(fr)
        .filter((F.col("n_seed") > 0) & (F.col("copies") == 0))
        .filter((F.col("src_o") < committed) & readable(fr, F.col("src_p")))
    )
    n = int(lost.agg(F.sum("n_seed")).first()[0] or 0)
    made: list[Example] = []
    if n and max_examples:
        first = lost.orderBy("src_p", "src_o").limit(max_examples).select("src_p", "src_o")
        rows = (
            fr.seeds.join(F.broadcast(first), ["src_p", "src_o"])
            .orderBy("src_p", "src_o", "send_index")
            .limit(max_examples)
            .collect()
        )
        want = sorted({(int(r["src_p"]), int(r["src_o"])) for r in rows})
        writers = _writers(fr, want)
        done = sorted({w[4] for ws in writers.values() for w in ws if w[4] is not None})
        ops = ops_at(fr, done)
        written = {src: X.written_outputs(src, writers.get(src, []), ops) for src in want}
        targets = {src: X.evidence_target(w) for src, w in written.items()}
        ev = _log_at(fr, spark, run_dir, [t for t in targets.values() if t is not None])
        offsets = [] if fr.offsets_index is None else [fr.offsets_index]
        for r in rows:
            committed = fr.committed_map.get(r["src_p"])
            idx = [r["send_index"], *offsets]
            src = (int(r["src_p"]), int(r["src_o"]))
            made.append(
                X.lost(
                    r["value"],
                    r["src_p"],
                    r["src_o"],
                    committed,
                    idx,
                    written=written[src],
                    log=ev.get(targets[src]) if targets[src] else None,
                )
            )
    return result(fr, "lost", n, made)


def _writers(fr: EosFrames, want: list[tuple[int, int]]) -> dict[tuple[int, int], list[X.Writer]]:
    """The transactions whose inputs hold these few input positions (a scan of the txns view
    against a broadcast list)."""
    keys = fr.drain.sparkSession.createDataFrame(want, "w_p int, w_o long")
    x = fr.txns.select(
        "instance",
        "txn_seq",
        "done_type",
        "inv_index",
        "done_index",
        F.explode("inputs").alias("x"),
    )
    x = x.select(
        "*", F.col("x")[0].cast("int").alias("w_p"), F.col("x")[1].cast("long").alias("w_o")
    )
    out: dict[tuple[int, int], list[X.Writer]] = {}
    for r in x.join(F.broadcast(keys), ["w_p", "w_o"]).collect():
        w = (r["instance"], r["txn_seq"], r["done_type"], r["inv_index"], r["done_index"])
        out.setdefault((r["w_p"], r["w_o"]), []).append(w)
    return out


def _log_at(
    fr: EosFrames, spark: SparkSession, run_dir: Path, outputs: list[tuple[int, int]]
) -> dict[tuple[int, int], dict[str, Any]]:
    """Broker-log evidence of output positions (partition, offset) of the output topic."""
    log = run_log(fr, spark, run_dir) if outputs else None
    if log is None or fr.output_topic is None:
        return {}
    got = log.evidence([(fr.output_topic, p, o) for p, o in outputs])
    return {(p, o): e for (_t, p, o), e in got.items()}


def _ident_order() -> list[Any]:
    return [F.col("src_p").isNull(), "src_p", "src_o", "ident"]


def check_duplicate(fr: EosFrames, max_examples: int) -> dict[str, Any]:
    """Inputs (source position, else input value) with more than one committed output."""
    dup = ident_table(fr).filter(F.col("copies") > 1)
    n = dup.count()
    made: list[Example] = []
    if n and max_examples:
        top = (
            dup.withColumn("ident", ident_of())
            .orderBy(*_ident_order())
            .limit(max_examples)
            .select("ident")
            .collect()
        )
        idents = [r["ident"] for r in top]
        keys = fr.drain.sparkSession.createDataFrame([(i,) for i in idents], "ident string")
        recs: dict[str, list[Any]] = {i: [] for i in idents}
        for r in fr.drain.join(F.broadcast(keys), ["ident"]).collect():
            recs[r["ident"]].append(r)
        for ident in idents:
            rs = recs[ident]
            made.append(X.duplicate(ident, rs, [i for r in rs for i in txn_idx(r)]))
    return result(fr, "duplicate", n, made)


def _overtaken_thresholds(d: DataFrame) -> DataFrame:
    """Per (src_p, generation, instance): the smallest source offset that a *newer* generation
    of *another* instance drained from that input partition (``th``).

    A record is overtaken iff its source offset is >= its group's ``th``. The groups are few
    (partitions x generations x instances), so this self-join is small and the records then
    need only a broadcast equi-join, not a range join against every group.
    """
    usable = F.col("generation").isNotNull() & (F.col("generation") >= 0)
    g = (
        d.filter(usable & F.col("src_p").isNotNull())
        .groupBy("src_p", "generation", "instance")
        .agg(F.min("src_o").alias("m"))
    )
    other = g.select(
        F.col("src_p").alias("g_p"),
        F.col("generation").alias("g_gen"),
        F.col("instance").alias("g_inst"),
        "m",
    )
    cond = (
        (F.col("g_p") == F.col("src_p"))
        & (F.col("g_gen") > F.col("generation"))
        & (F.col("g_inst") != F.col("instance"))
    )
    return (
        g.select("src_p", "generation", "instance")
        .join(F.broadcast(other), cond)
        .groupBy("src_p", "generation", "instance")
        .agg(F.min("m").alias("th"))
    )


def check_zombie(fr: EosFrames, max_examples: int) -> dict[str, Any]:
    """Committed outputs of fenced instances, or of generations another instance overtook."""
    d = fr.drain.filter(F.col("instance").isNotNull())
    th = _overtaken_thresholds(d)
    fences = fr.fences.select("instance", "fence_time", "fence_index")
    j = d.join(F.broadcast(fences), ["instance"], "left").join(
        F.broadcast(th), ["src_p", "generation", "instance"], "left"
    )
    fenced = F.coalesce(F.col("inv_time") > F.col("fence_time"), F.lit(False))
    over = F.coalesce(F.col("src_o") >= F.col("th"), F.lit(False))
    bad = j.filter(fenced | over).withColumn("fenced", fenced)
    n = bad.count()
    rows = bad.orderBy("partition", "offset").limit(max_examples).collect() if n else []
    newer = _newer(d, [r for r in rows if not r["fenced"]])
    made: list[Example] = []
    for r in rows:
        if r["fenced"]:
            made.append(X.zombie_write(r["in_value"], r, txn_idx(r), fence_index=r["fence_index"]))
        else:
            newer_of = tuple(newer[(r["partition"], r["offset"])])
            made.append(X.zombie_write(r["in_value"], r, txn_idx(r), newer=newer_of))
    return result(fr, "zombie-write", n, made)


def _newer(d: DataFrame, rows: list[Any]) -> dict[tuple[int, int], tuple[int, int, int]]:
    """For a few overtaken records: the first (generation, instance, min offset) overtaking it."""
    if not rows:
        return {}
    spark = d.sparkSession
    few = spark.createDataFrame(
        [
            (r["partition"], r["offset"], r["src_p"], r["src_o"], r["generation"], r["instance"])
            for r in rows
        ],
        "partition int, offset long, src_p int, src_o long, generation long, instance int",
    )
    usable = F.col("generation").isNotNull() & (F.col("generation") >= 0)
    groups = (
        d.filter(usable & F.col("src_p").isNotNull())
        .groupBy("src_p", "generation", "instance")
        .agg(F.min("src_o").alias("m"))
        .select(
            F.col("src_p").alias("g_p"),
            F.col("generation").alias("g_gen"),
            F.col("instance").alias("g_inst"),
            "m",
        )
    )
    cond = (
        (F.col("g_p") == F.col("src_p"))
        & (F.col("g_gen") > F.col("generation"))
        & (F.col("g_inst") != F.col("instance"))
        & (F.col("m") <= F.col("src_o"))
    )
    out = (
        few.join(groups, cond)
        .groupBy("partition", "offset")
        .agg(F.min(F.struct("g_gen", "g_inst", "m")).alias("n"))
        .collect()
    )
    return {(r["partition"], r["offset"]): tuple(r["n"]) for r in out}


def _poison_flag(fr: EosFrames, d: DataFrame) -> DataFrame:
    """``d`` with ``_poison``: its input value, value or key is a poison value.

    The poison values are few, so each test is a broadcast join.
    """
    pv = F.broadcast(fr.poison)
    for i, c in enumerate(("in_value", "value", "key")):
        p = pv.select(F.col("pv").alias(c), F.lit(True).alias(f"_p{i}"))
        d = d.join(p, [c], "left")
    poison = F.col("_p0").isNotNull() | F.col("_p1").isNotNull() | F.col("_p2").isNotNull()
    return d.withColumn("_poison", poison).drop("_p0", "_p1", "_p2")


def _with_positions(fr: EosFrames, d: DataFrame, log: EosLog | None) -> DataFrame:
    """``d`` with its logged position: ``l_pid``, ``l_outcome`` and ``l_end`` (the offset of
    the marker that ended its transaction); nulls without a dump or outside it."""
    if log is None or fr.output_topic is None:
        return d.select(
            "*",
            F.lit(None).cast("long").alias("l_pid"),
            F.lit(None).cast("string").alias("l_outcome"),
            F.lit(None).cast("long").alias("l_end"),
            F.lit(None).cast("int").alias("l_node"),
        )
    pos = log.positions(fr.output_topic).select(
        "partition",
        "offset",
        F.col("node").alias("l_node"),
        F.col("producerId").alias("l_pid"),
        F.col("outcome").alias("l_outcome"),
        F.col("end_marker.o").alias("l_end"),
    )
    return d.join(pos, ["partition", "offset"], "left")


def _where(rows: list[Any]) -> list[Where]:
    return [(r["topic"], r["partition"], r["offset"]) for r in rows if r["partition"] is not None]


def check_aborted_read(
    fr: EosFrames, max_examples: int, spark: SparkSession, run_dir: Path
) -> dict[str, Any]:
    """Drained records of aborted/open transactions or of poison inputs; poison in txns.

    The poison values are few, so every test against them is a broadcast join; the log dump's
    positions (when the run has a dump) are the only shuffle.
    """
    log = run_log(fr, spark, run_dir)
    d = _with_positions(fr, _poison_flag(fr, fr.drain), log)
    in_log = F.col("l_outcome").isin("aborted", "open")
    kind = F.when(F.col("_poison"), F.lit("poison-output")).when(
        in_log, F.concat(F.col("l_outcome"), F.lit("-in-log"))
    )
    recs = d.withColumn("kind", kind).filter(F.col("kind").isNotNull())
    recs = recs.select(
        F.lit(0).alias("src"),
        "topic",
        "partition",
        "offset",
        "kind",
        F.array("in_value").alias("values"),
        F.struct(*RECORD_COLS).alias("rec"),
        "inv_index",
        "done_index",
        F.lit(None).cast("int").alias("instance"),
        F.lit(None).cast("long").alias("txn_seq"),
    )
    keys = ["instance", "txn_seq", "inv_index", "done_index"]
    txn_in = fr.txns.select(*keys, F.posexplode("inputs").alias("pos", "x")).select(
        *keys, "pos", F.col("x")[2].alias("v")
    )
    # The poison values of a transaction in input order (collect_list alone has no order).
    in_order = F.transform(F.array_sort(F.collect_list(F.struct("pos", "v"))), lambda s: s["v"])
    txn_bad = (
        txn_in.join(F.broadcast(fr.poison), F.col("v") == F.col("pv"))
        .groupBy(*keys)
        .agg(in_order.alias("values"))
        .select(
            F.lit(1).alias("src"),
            F.lit(None).cast("string").alias("topic"),
            F.lit(None).cast("int").alias("partition"),
            F.lit(None).cast("long").alias("offset"),
            F.lit("poison-input").alias("kind"),
            "values",
            F.lit(None).cast(recs.schema["rec"].dataType).alias("rec"),
            "inv_index",
            "done_index",
            "instance",
            "txn_seq",
        )
    )
    bad = recs.unionByName(txn_bad)
    n = bad.count()
    order = ["src", "partition", "offset", "instance", "txn_seq"]
    rows = bad.orderBy(*order).limit(max_examples).collect() if n and max_examples else []
    ev = log.evidence(_where(rows)) if log is not None else {}
    made = [
        X.aborted_read(
            list(r["values"]),
            r["kind"],
            r["rec"],
            txn_idx(r),
            ev.get((r["topic"], r["partition"], r["offset"])),
        )
        for r in rows
    ]
    return result(fr, "aborted-read", n, made)


def _failed_writer_records(fr: EosFrames, log: EosLog | None) -> DataFrame:
    """The drained records with their logged position, ``_failed`` (the writer transaction
    its headers name ended ``fail``) and ``premature``: such a record committed by a COMMIT
    marker the broker wrote before the client recorded that failure (see
    :func:`check_premature_commit`). Planned once per run, not persisted: it carries every
    column of every drained record (the examples show them), and persisting that cost six
    times a scan of it (10M-op history: 32.6 s against 5.3 s)."""
    with fr.lock:
        if _FAILED_WRITERS not in fr.extras:
            fr.extras[_FAILED_WRITERS] = _build_failed_writer_records(fr, log)
        return fr.extras[_FAILED_WRITERS]


_FAILED_WRITERS = "failed-writer-records"


def _build_failed_writer_records(fr: EosFrames, log: EosLog | None) -> DataFrame:
    # Failed transactions are few (aborts): broadcast joins, not shuffles.
    failed = fr.txns.filter(F.col("done_type") == "fail").select(
        "instance",
        "txn_seq",
        F.lit(True).alias("_failed"),
        F.unix_millis(F.to_timestamp("done_wall")).alias("_failed_ms"),
    )
    d = fr.drain.filter(F.col("inv_index").isNotNull())
    d = d.join(F.broadcast(failed), ["instance", "txn_seq"], "left")
    d = _with_positions(fr, _poison_flag(fr, d), log)
    if log is None or fr.output_topic is None:
        return d.withColumn("premature", F.lit(False))
    times = log.marker_times(fr.output_topic)
    d = d.join(
        times.select(
            F.col("node").alias("l_node"),
            "partition",
            F.col("offset").alias("l_end"),
            F.col("create_time").alias("_end_ms"),
        ),
        ["l_node", "partition", "l_end"],
        "left",
    )
    early = (F.col("l_outcome") == "committed") & (F.col("_end_ms") < F.col("_failed_ms"))
    return d.withColumn("premature", F.coalesce(F.col("_failed") & early, F.lit(False)))


def _aborted_read() -> Column:
    """Records aborted-read names (poison, or a logged position aborted or open): the checks
    that join failed writers with the log leave them to it."""
    return F.col("_poison") | F.coalesce(F.col("l_outcome").isin("aborted", "open"), F.lit(False))


def check_committed_later(
    fr: EosFrames, max_examples: int, spark: SparkSession, run_dir: Path
) -> dict[str, Any]:
    """Drained records that a later transaction than their writer's committed (KIP-890).

    ``writer-aborted``: the writer transaction its headers name ended ``fail``.
    ``merged-in-log``: with a dump, the marker that committed it also committed records of a
    writer transaction invoked later. Records aborted-read names are left to it, and so are
    the ones premature-commit names. One window over the drained records keyed by the marker
    that committed them finds the latest writer of each logged transaction.
    """
    log = run_log(fr, spark, run_dir)
    d = _failed_writer_records(fr, log)
    writer = F.struct(
        F.col("inv_index").alias("i"), F.col("instance").alias("n"), F.col("txn_seq").alias("s")
    )
    if log is None:
        d = d.withColumn("newest", F.lit(None).cast(d.select(writer).schema[0].dataType))
    else:
        ended = (F.col("l_outcome") == "committed") & F.col("l_end").isNotNull()
        w = Window.partitionBy("partition", "l_pid", "l_end")
        d = d.withColumn("newest", F.when(ended, F.max(F.when(ended, writer)).over(w)))
    later = F.coalesce(F.col("newest.i") > F.col("inv_index"), F.lit(False))
    kind = F.when(F.col("_failed"), F.lit("writer-aborted")).when(later, F.lit("merged-in-log"))
    aborted_read = _aborted_read()
    bad = (
        d.withColumn("kind", kind)
        .withColumn("later", F.when(later, F.col("newest")))
        .filter(F.col("kind").isNotNull() & ~aborted_read & ~F.col("premature"))
    )
    n = bad.count()
    rows = bad.orderBy("partition", "offset").limit(max_examples).collect() if n else []
    made: list[Example] = []
    if rows:
        ev = log.evidence(_where(rows)) if log is not None else {}
        keys = {(r["instance"], r["txn_seq"]) for r in rows}
        keys |= {(r["later"]["n"], r["later"]["s"]) for r in rows if r["later"] is not None}
        txns = _txns_of(fr, keys)
        for r in rows:
            later_of = later_idx = None
            if r["later"] is not None:
                key = (r["later"]["n"], r["later"]["s"])
                t = txns.get(key)
                later_of = (key[0], key[1], None if t is None else t["done_type"])
                later_idx = [] if t is None else txn_idx(t)
            own = txns.get((r["instance"], r["txn_seq"]))
            made.append(
                X.committed_later(
                    r["in_value"],
                    r["kind"],
                    (r["instance"], r["txn_seq"]),
                    None if own is None else own["done_type"],
                    r,
                    txn_idx(r),
                    later=later_of,
                    later_idx=later_idx,
                    log=ev.get((r["topic"], r["partition"], r["offset"])),
                )
            )
    return result(fr, "committed-in-later-transaction", n, made)


def check_premature_commit(
    fr: EosFrames, max_examples: int, spark: SparkSession, run_dir: Path
) -> dict[str, Any]:
    """Drained records of a failed transaction that a COMMIT marker written before the
    failure committed: a commit nobody asked for while the transaction was still open (a
    stale EndTxn of the producer's previous transaction applied to it: KAFKA-17754). Needs
    the dump (marker times); aborted-read's records are left to it."""
    log = run_log(fr, spark, run_dir)
    if log is None:
        return result(fr, "premature-commit", 0, [])
    d = _failed_writer_records(fr, log)
    aborted_read = _aborted_read()
    bad = d.filter(F.col("premature") & ~aborted_read)
    n = bad.count()
    rows = bad.orderBy("partition", "offset").limit(max_examples).collect() if n else []
    made: list[Example] = []
    if rows:
        ev = log.evidence(_where(rows))
        txns = _txns_of(fr, {(r["instance"], r["txn_seq"]) for r in rows})
        for r in rows:
            own = txns.get((r["instance"], r["txn_seq"]))
            made.append(
                X.premature_commit(
                    r["in_value"],
                    (r["instance"], r["txn_seq"]),
                    r,
                    [] if own is None else txn_idx(own),
                    marker_ms=r["_end_ms"],
                    failed_ms=r["_failed_ms"],
                    log=ev.get((r["topic"], r["partition"], r["offset"])),
                )
            )
    return result(fr, "premature-commit", n, made)


def _txns_of(fr: EosFrames, keys: set[tuple[int, int]]) -> dict[tuple[int, int], Any]:
    """The few transactions (instance, seq) an example names, as rows of the txns view."""
    if not keys:
        return {}
    want = fr.drain.sparkSession.createDataFrame(sorted(keys), "instance int, txn_seq long")
    rows = fr.txns.join(F.broadcast(want), ["instance", "txn_seq"]).collect()
    return {(r["instance"], r["txn_seq"]): r for r in rows}


#: Safety checks in report order; each takes (frames, max_examples, spark, run_dir).
CHECKS: dict[str, Callable[[EosFrames, int, SparkSession, Path], dict[str, Any]]] = {
    "lost": check_lost,
    "duplicate": lambda fr, n, _s, _d: check_duplicate(fr, n),
    "zombie-write": lambda fr, n, _s, _d: check_zombie(fr, n),
    "aborted-read": check_aborted_read,
    "committed-in-later-transaction": check_committed_later,
    "premature-commit": check_premature_commit,
    "torn-transaction": lambda fr, n, s, d: eos_rules.check_torn(
        fr, n, lambda outs: _log_at(fr, s, d, outs)
    ),
    "order": lambda fr, n, _s, _d: eos_rules.check_order(fr, n),
    "hanging-transaction": eos_rules.check_hanging,
}


#: How many checks run at once: each is a few small queries whose planning takes one core, so
#: on two cores three side by side keep both busy.
CHECK_THREADS = 3


def _error(e: BaseException) -> str:
    return str(spark_error(e))


def eos_checks(spark: SparkSession, run_dir: Path, *, max_examples: int = 8) -> dict[str, Any]:
    """Every eos check with an existing session; input errors raise CheckerInputError."""
    loaded = load_history(spark, run_dir)
    saved = _tune(spark, loaded.rows)
    try:
        return _eos_checks(spark, loaded, Path(run_dir), max_examples)
    finally:
        restore_conf(spark, saved)


def prepare_eos(spark: SparkSession, run_dir: Path, max_examples: int = 8) -> None:
    """Convert the history and parse its views into the run's caches, and, while the run has
    no broker log dump yet, run every check that needs none.

    Why: the conversion and most checks need only the history, so the harness runs them while
    the cluster stops and its logs are dumped; the check proper then reads the caches and
    runs only what needed the dump (:data:`_EARLY` keeps the rest). A check that needs the
    dump for its count (``aborted-read``), or for the evidence of an example it found,
    raises :class:`checkers.eos_log.LogNotYet` here and is simply run again later. Input
    errors are left for the check to report.
    """
    run_dir = Path(run_dir)
    try:
        loaded = load_history(spark, run_dir)
    except CheckerInputError:
        return
    saved = _tune(spark, loaded.rows)
    try:
        fr = build(spark, loaded)
        try:
            key = _early_key(run_dir, max_examples)
            if key is not None and not logdump_path(run_dir).is_file():
                defer_log(fr)
                _remember(key, _without_log(fr, max_examples, spark, run_dir))
        finally:
            fr.release()
    finally:
        restore_conf(spark, saved)


#: Checks run early by :func:`prepare_eos`, by (history, size, mtime, max_examples): results
#: that did not touch the dump, so a later check of the same history returns them unchanged.
_EARLY: dict[tuple[str, int, int, int], dict[str, dict[str, Any]]] = {}
_EARLY_LOCK = threading.Lock()
#: The name the liveness check goes by among the early results.
_PROGRESS = ""


def _early_key(run_dir: Path, max_examples: int) -> tuple[str, int, int, int] | None:
    path = history_path(run_dir)
    try:
        st = path.stat()
    except OSError:
        return None
    return (str(path.resolve()), st.st_size, st.st_mtime_ns, max_examples)


def _remember(key: tuple[str, int, int, int], results: dict[str, dict[str, Any]]) -> None:
    with _EARLY_LOCK:
        _EARLY.clear()  # one run's at a time: a process judges its runs one after another
        _EARLY[key] = results


def _take_early(run_dir: Path, max_examples: int) -> dict[str, dict[str, Any]]:
    key = _early_key(run_dir, max_examples)
    with _EARLY_LOCK:
        return _EARLY.pop(key, {}) if key is not None else {}


def _jobs(
    fr: EosFrames, max_examples: int, spark: SparkSession, run_dir: Path
) -> dict[str, Callable[[], dict[str, Any]]]:
    """Every safety check by name, and the liveness check as :data:`_PROGRESS`."""
    jobs: dict[str, Callable[[], dict[str, Any]]] = {
        name: (lambda fn=fn: fn(fr, max_examples, spark, run_dir)) for name, fn in CHECKS.items()
    }
    jobs[_PROGRESS] = lambda: eos_rules.check_progress(fr, max_examples)
    return jobs


def _without_log(
    fr: EosFrames, max_examples: int, spark: SparkSession, run_dir: Path
) -> dict[str, dict[str, Any]]:
    """The checks that complete without the dump; a failing one is left for the check."""
    jobs = _jobs(fr, max_examples, spark, run_dir)

    def attempt(fn: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        try:
            return fn()
        except Exception:  # LogNotYet, or a failure the check proper will meet and report
            return None

    with ThreadPoolExecutor(CHECK_THREADS, thread_name_prefix="eos-early") as pool:
        futures = {name: pool.submit(attempt, fn) for name, fn in jobs.items()}
    done = {name: f.result() for name, f in futures.items()}
    return {name: r for name, r in done.items() if r is not None}


#: Session settings by history size. Small runs (tests, short real runs) are dominated by
#: per-query overhead: adaptive planning and whole-stage code generation cost more than they
#: save (measured: about 3x faster without), and so does compiling expressions at all
#: (interpreted: 9.2 s against 12.4 s for a 60 s run's checks in a warm JVM, two shuffle
#: partitions included). Big runs are dominated by rows: generated code and adaptive
#: coalescing of shuffle partitions win there.
SMALL_RUN = 200_000
_TUNE_SMALL = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.autoBroadcastJoinThreshold": str(64 << 20),
}
_TUNE_BIG = {
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.codegen.wholeStage": "true",
    "spark.sql.codegen.factoryMode": "FALLBACK",
    "spark.sql.autoBroadcastJoinThreshold": str(64 << 20),
}


def _tune(spark: SparkSession, rows: int) -> dict[str, str | None]:
    return set_conf(spark, _TUNE_SMALL if rows < SMALL_RUN else _TUNE_BIG)


def _eos_checks(
    spark: SparkSession, loaded: Loaded, run_dir: Path, max_examples: int
) -> dict[str, Any]:
    try:
        fr = build(spark, loaded)
    except CheckerInputError:
        raise
    except Exception as e:  # cannot even parse the views: every check is unknown
        return X.all_unknown(_error(e))
    early = _take_early(run_dir, max_examples)
    try:
        jobs = _jobs(fr, max_examples, spark, run_dir)
        jobs |= {name: (lambda r=r: r) for name, r in early.items()}
        progress = jobs.pop(_PROGRESS)
        out = X.run_checks(jobs, progress, _error, CHECK_THREADS)
    finally:
        fr.release()
    if loaded.notes:
        out["input_notes"] = list(loaded.notes)
    return out


def check_eos(
    run_dir: Path, spark: SparkSession | None = None, max_examples: int = 8
) -> dict[str, Any]:
    """All eos checks on a stored run, with the given session or one started for this call.

    A session started here is stopped (JVM included) before returning. Unusable input raises
    :class:`CheckerInputError`; a Spark failure gives ``valid: "unknown"`` with the error.
    """
    run_dir = Path(run_dir)
    try:
        if spark is not None:
            return eos_checks(spark, run_dir, max_examples=max_examples)
        with spark_session() as s:
            return eos_checks(s, run_dir, max_examples=max_examples)
    except CheckerInputError:
        raise
    except Exception as e:
        out = X.all_unknown(_error(e))
        out["error"] = _error(e)
        return out
