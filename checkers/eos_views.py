"""The eos views of a run, parsed once and stored as typed Parquet beside the run.

Why: the history cache (:mod:`checkers.load`) keeps every op's ``value`` as JSON text, and
parsing that text (millions of transactions, drained records in a few huge ``read`` ops)
costs far more than the checks' joins. The first check of a run parses the views with
:mod:`checkers.eos_frames` and writes them to ``<run>/.parquet/eos-views/`` (manifest
``eos-views.json``: the history's size and mtime, :data:`VIEWS_FORMAT` and the small
constants); later checks of the unchanged history read only the typed columns they use.
A run directory that cannot be written is parsed each time, with the views persisted in memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel

from checkers import eos_frames as E
from checkers.eos_results import transaction_timeout_ms
from checkers.load import Loaded, derived_cache, publish_derived

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Bump when a view's columns or meaning change, so stale views are rebuilt, never misread.
VIEWS_FORMAT = 2
NAME = "eos-views"
VIEWS = ("seeds", "poison", "txns", "drain", "committed", "fences", "finals")
_HIST_COLS = ("index", "time", "wall", "process", "process_is_int", "type", "f", "value")


def build(spark: SparkSession, loaded: Loaded) -> E.EosFrames:
    """The run's :class:`EosFrames`, from the stored views if they are current."""
    data, meta = derived_cache(loaded.source, NAME)
    if meta is None or meta.get("views_format") != VIEWS_FORMAT:
        done = publish_derived(
            loaded.source,
            NAME,
            lambda d: _write_views(spark, loaded.df, d),
            {"views_format": VIEWS_FORMAT},
        )
        if done is None:  # read-only run directory: parse into memory
            fr = _in_memory(spark, loaded.df)
            fr.txn_timeout_ms = transaction_timeout_ms(loaded.header)
            return fr
        data, meta = done
    views = {name: spark.read.parquet(str(data / name)) for name in VIEWS}
    fr = _frames(loaded.df, views, meta)
    fr.txn_timeout_ms = transaction_timeout_ms(loaded.header)
    return fr


def _hist(df: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return df.select(*_HIST_COLS).filter(F.col("f").isin(*E.PARSED_FS))


def _parallelism(spark: SparkSession) -> int:
    return max(2, int(spark.sparkContext.defaultParallelism)) * 2


def _write_views(spark: SparkSession, hist_df: DataFrame, out: Path) -> dict[str, Any]:
    """Parse every view, write it as Parquet under ``out``; returns the small constants.

    Seeds and transactions are written first and read back for the drain, so the history's
    JSON is parsed once per view rather than once per use.
    """
    hist = _hist(hist_df)
    out.mkdir(parents=True, exist_ok=True)
    small, info = E.parse_small(hist_df)
    for name, df in small.items():
        df.write.parquet(str(out / name))
    E.parse_seeds(hist).write.parquet(str(out / "seeds"))
    E.parse_txns(hist).write.parquet(str(out / "txns"))
    seeds = spark.read.parquet(str(out / "seeds"))
    txns = spark.read.parquet(str(out / "txns"))
    E.parse_drain(hist, seeds, txns, _parallelism(spark)).write.parquet(str(out / "drain"))
    return info


def _in_memory(spark: SparkSession, hist_df: DataFrame) -> E.EosFrames:
    hist = _hist(hist_df)
    small, info = E.parse_small(hist_df)
    seeds = E.parse_seeds(hist).persist(StorageLevel.MEMORY_AND_DISK)
    txns = E.parse_txns(hist).persist(StorageLevel.MEMORY_AND_DISK)
    drain = E.parse_drain(hist, seeds, txns, _parallelism(spark))
    views = small | {"seeds": seeds, "txns": txns, "drain": drain.persist(StorageLevel.DISK_ONLY)}
    fr = _frames(hist_df, views, info)
    fr.persisted += [seeds, txns, views["drain"]]
    return fr


def _frames(hist: DataFrame, v: dict[str, DataFrame], meta: dict[str, Any]) -> E.EosFrames:
    return E.EosFrames(
        hist=hist,
        seeds=v["seeds"],
        poison=v["poison"],
        txns=v["txns"],
        drain=v["drain"],
        committed=v["committed"],
        fences=v["fences"],
        finals=v["finals"],
        n_out=int(meta["n_out"]),
        reads=[(int(p), bool(ok)) for p, ok in meta["reads"]],
        committed_map={int(p): int(o) for p, o in meta["committed_map"]},
        offsets_index=meta["offsets_index"],
        output_topic=meta["output_topic"],
        drain_op=meta["drain_op"],
    )
