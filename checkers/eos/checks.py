"""The eos family's Spark checks: exactly-once anomalies of a consume-transform-produce run.

Why Spark: a long run under faults holds millions of seeded values and drained outputs; every
check here is a join or aggregation over DataFrames built by :mod:`checkers.eos.frames`, so it
scales past one machine's memory. :mod:`checkers.eos.pyref` is the same set of definitions in
plain Python, and the tests require both to agree. Definitions: ``docs/anomalies.md``,
"eos workload". Each check is a pure function of the stored run (history plus, if present,
the broker log dump); nothing talks to Kafka.

Each ``check_*`` takes the run's :class:`checkers.eos.frames.EosFrames` and gives one
checker's result; :mod:`checkers.eos.run` runs them on a run directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from checkers.eos import results as X
from checkers.eos.frames import EosFrames, ops_at
from checkers.eos.log import PositionLog, Where, run_log
from checkers.eos.results import RECORD_COLS, Example
from checkers.eos.rules import (
    committed_of,
    ident_of,
    ident_table,
    readable,
    result,
    txn_idx,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

__all__ = [
    "check_aborted_read",
    "check_committed_later",
    "check_duplicate",
    "check_invalid_state_commit",
    "check_lost",
    "check_premature_commit",
    "check_zombie",
    "log_at",
]


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
        ev = log_at(fr, spark, run_dir, [t for t in targets.values() if t is not None])
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


def log_at(
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


def _with_positions(fr: EosFrames, d: DataFrame, log: PositionLog | None) -> DataFrame:
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


def _failed_writer_records(fr: EosFrames, log: PositionLog | None) -> DataFrame:
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


def _build_failed_writer_records(fr: EosFrames, log: PositionLog | None) -> DataFrame:
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


def check_invalid_state_commit(fr: EosFrames, max_examples: int) -> dict[str, Any]:
    """Transactions whose commit was refused with INVALID_TXN_STATE (KAFKA-20785): of the
    ``info`` completions (a few per run: each ends its processor), those whose recorded
    error :func:`checkers.eos.results.invalid_state_commit` counts."""
    info = (
        fr.txns.filter(F.col("done_type") == "info")
        .select("instance", "txn_seq", "inv_index", "done_index")
        .orderBy("done_index")
        .collect()
    )
    ops = ops_at(fr, [r["done_index"] for r in info])
    made = []
    for r in info:
        error = ops[r["done_index"]].get("error")
        idx = [r["inv_index"], r["done_index"]]
        ex = X.invalid_state_commit(r["instance"], r["txn_seq"], error, idx)
        if ex is not None:
            made.append(ex)
    return result(fr, "invalid-state-commit", len(made), made[:max_examples])
