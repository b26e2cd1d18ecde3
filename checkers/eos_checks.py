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

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checkers import eos_rules
from checkers.eos_frames import EosFrames, build, record_dict
from checkers.eos_pyref import combine_eos
from checkers.eos_rules import Example, finish, readable, readable_parts
from checkers.load import CheckerInputError, load_history, load_logdump, logdump_path
from checkers.spark import spark_error, spark_session

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession

__all__ = ["CHECKS", "CheckerInputError", "check_eos", "eos_checks"]


def _txn_idx(r: Any) -> list[int]:
    return [i for i in (r["inv_index"], r["done_index"]) if i is not None]


def check_lost(fr: EosFrames, max_examples: int) -> dict[str, Any]:
    """Acknowledged seeds below the group's committed offset with no committed output."""
    ident = F.concat_ws("/", F.col("src_p").cast("string"), F.col("src_o").cast("string"))
    have = fr.drain.select("ident").distinct()
    lost = (
        fr.seeds.join(fr.committed, ["src_p"])
        .filter(F.col("src_o") < F.col("committed"))
        .withColumn("ident", ident)
        .join(have, ["ident"], "left_anti")
        .join(F.broadcast(readable_parts(fr)), readable(fr, F.col("src_p")), "left_semi")
    )

    def make(r: Any) -> Example:
        ex = {
            "values": [r["value"]],
            "input": [r["src_p"], r["src_o"]],
            "committed_offset": r["committed"],
        }
        idx = [r["send_index"]] + ([fr.offsets_index] if fr.offsets_index is not None else [])
        return ex, idx

    return finish(fr, lost, ["src_p", "src_o"], max_examples, make)


def _ident_order() -> list[Any]:
    return [F.col("src_p").isNull(), "src_p", "src_o", "ident"]


def check_duplicate(fr: EosFrames, max_examples: int) -> dict[str, Any]:
    """Inputs (source position, else input value) with more than one committed output."""
    rec = F.struct("topic", "partition", "offset", "key", "value", "headers")
    dup = (
        fr.drain.groupBy("ident")
        .agg(
            F.count(F.lit(1)).alias("copies"),
            F.first("src_p").alias("src_p"),
            F.first("src_o").alias("src_o"),
            F.first("in_value", ignorenulls=True).alias("in_value"),
            F.collect_list(rec).alias("records"),
            F.collect_set("inv_index").alias("inv"),
            F.collect_set("done_index").alias("done"),
        )
        .filter(F.col("copies") > 1)
    )

    def make(r: Any) -> Example:
        ex = {
            "values": [r["in_value"]],
            "input": r["ident"],
            "copies": r["copies"],
            "records": sorted(
                (record_dict(x) for x in r["records"]),
                key=lambda d: (d["partition"], d["offset"]),
            ),
        }
        return ex, list(r["inv"]) + list(r["done"])

    return finish(fr, dup, _ident_order(), max_examples, make)


def check_zombie(fr: EosFrames, max_examples: int) -> dict[str, Any]:
    """Committed outputs of fenced instances, or of generations another instance overtook."""
    d = fr.drain.filter(F.col("instance").isNotNull())
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
    over = (
        d.filter(usable)
        .join(F.broadcast(groups), cond)
        .groupBy("partition", "offset")
        .agg(F.min(F.struct("g_gen", "g_inst", "m")).alias("newer"))
    )
    fenced = d.join(fr.fences, ["instance"]).filter(F.col("inv_time") > F.col("fence_time"))
    fenced = fenced.select("partition", "offset", "fence_index")
    bad = (
        d.join(fenced, ["partition", "offset"], "left")
        .join(over, ["partition", "offset"], "left")
        .filter(F.col("fence_index").isNotNull() | F.col("newer").isNotNull())
    )

    def make(r: Any) -> Example:
        ex: dict[str, Any] = {"values": [r["in_value"]], "records": [record_dict(r)]}
        idx = _txn_idx(r)
        if r["fence_index"] is not None:
            ex["reason"] = "fenced"
            idx.append(r["fence_index"])
        else:
            n = r["newer"]
            ex["reason"] = "overtaken"
            ex["newer"] = {"generation": n["g_gen"], "instance": n["g_inst"]}
            ex["newer"]["min_src_offset"] = n["m"]
        return ex, idx

    return finish(fr, bad, ["partition", "offset"], max_examples, make)


def _log_outcomes(fr: EosFrames, spark: SparkSession, run_dir: Path) -> DataFrame | None:
    """Drained positions whose transaction the broker log shows aborted or still open."""
    from checkers.log_evidence import aborted_in_log, prepare

    if fr.output_topic is None or not logdump_path(run_dir).is_file():
        return None
    ev = prepare(load_logdump(spark, run_dir).df)
    rows = aborted_in_log(ev).filter(
        (F.col("topic") == fr.output_topic) & F.col("outcome").isin("aborted", "open")
    )
    return rows.select("topic", "partition", "offset", "outcome")


def check_aborted_read(
    fr: EosFrames, max_examples: int, spark: SparkSession, run_dir: Path
) -> dict[str, Any]:
    """Drained records of aborted/open transactions or of poison inputs; poison in txns."""
    pv = F.broadcast(fr.poison)
    d = fr.drain
    poisoned = (
        d.join(pv, d["in_value"] == pv["pv"], "left_semi")
        .unionByName(d.join(pv, d["value"] == pv["pv"], "left_semi"))
        .unionByName(d.join(pv, d["key"] == pv["pv"], "left_semi"))
        .select("partition", "offset", F.lit("poison-output").alias("kind"))
    )
    marked = poisoned
    logs = _log_outcomes(fr, spark, run_dir)
    if logs is not None:
        in_log = d.join(logs, ["topic", "partition", "offset"]).select(
            "partition", "offset", F.concat(F.col("outcome"), F.lit("-in-log")).alias("kind")
        )
        marked = marked.unionByName(in_log)
    marked = marked.groupBy("partition", "offset").agg(F.min("kind").alias("kind"))
    recs = d.join(marked, ["partition", "offset"]).select(
        F.lit(0).alias("src"),
        "partition",
        "offset",
        "kind",
        F.array("in_value").alias("values"),
        F.struct("topic", "partition", "offset", "key", "value", "headers").alias("rec"),
        "inv_index",
        "done_index",
        F.lit(None).cast("int").alias("instance"),
        F.lit(None).cast("long").alias("txn_seq"),
    )
    txn_in = fr.txns.select(
        "instance", "txn_seq", "inv_index", "done_index", F.explode("inputs").alias("x")
    ).select("instance", "txn_seq", "inv_index", "done_index", F.col("x")[2].alias("v"))
    txn_bad = (
        txn_in.join(pv, F.col("v") == F.col("pv"))
        .groupBy("instance", "txn_seq", "inv_index", "done_index")
        .agg(F.collect_list("v").alias("values"))
        .select(
            F.lit(1).alias("src"),
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

    def make(r: Any) -> Example:
        ex: dict[str, Any] = {"values": list(r["values"]), "kind": r["kind"]}
        if r["rec"] is not None:
            ex["records"] = [record_dict(r["rec"])]
        return ex, _txn_idx(r)

    order = ["src", "partition", "offset", "instance", "txn_seq"]
    return finish(fr, bad, order, max_examples, make)


#: Safety checks in report order; each takes (frames, max_examples, spark, run_dir).
CHECKS: dict[str, Callable[[EosFrames, int, SparkSession, Path], dict[str, Any]]] = {
    "lost": lambda fr, n, _s, _d: check_lost(fr, n),
    "duplicate": lambda fr, n, _s, _d: check_duplicate(fr, n),
    "zombie-write": lambda fr, n, _s, _d: check_zombie(fr, n),
    "aborted-read": check_aborted_read,
    "torn-transaction": lambda fr, n, _s, _d: eos_rules.check_torn(fr, n),
    "order": lambda fr, n, _s, _d: eos_rules.check_order(fr, n),
    "hanging-transaction": lambda fr, n, _s, _d: eos_rules.check_hanging(fr, n),
}


def _unknown(e: BaseException) -> dict[str, Any]:
    return {"valid": "unknown", "count": 0, "examples": [], "error": str(spark_error(e))}


def eos_checks(spark: SparkSession, run_dir: Path, *, max_examples: int = 8) -> dict[str, Any]:
    """Every eos check with an existing session; input errors raise CheckerInputError."""
    saved = _tune(spark)
    try:
        return _eos_checks(spark, run_dir, max_examples)
    finally:
        for k, v in saved.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


#: Session settings for the many small joins of one run: adaptive planning and whole-stage
#: code generation cost more than they save at this size (measured: about 3x faster).
_TUNE = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.autoBroadcastJoinThreshold": str(64 << 20),
}


def _tune(spark: SparkSession) -> dict[str, str | None]:
    saved: dict[str, str | None] = {}
    for k, v in _TUNE.items():
        saved[k] = spark.conf.get(k, None)
        spark.conf.set(k, v)
    return saved


def _eos_checks(spark: SparkSession, run_dir: Path, max_examples: int) -> dict[str, Any]:
    loaded = load_history(spark, run_dir)
    try:
        fr = build(spark, loaded.df, Path(run_dir))
    except CheckerInputError:
        raise
    except Exception as e:  # cannot even parse the views: every check is unknown
        bad = _unknown(e)
        return combine_eos({k: dict(bad) for k in CHECKS}, dict(bad))
    try:
        results: dict[str, dict[str, Any]] = {}
        for name, fn in CHECKS.items():
            try:
                results[name] = fn(fr, max_examples, spark, Path(run_dir))
            except CheckerInputError:
                raise
            except Exception as e:  # one broken check must not pass or sink the others
                results[name] = _unknown(e)
        try:
            liveness = eos_rules.check_progress(fr, max_examples)
        except Exception as e:
            liveness = _unknown(e)
    finally:
        fr.release()
    out = combine_eos(results, liveness)
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
        bad = _unknown(e)
        out = combine_eos({k: dict(bad) for k in CHECKS}, dict(bad))
        out["error"] = bad["error"]
        return out
