"""The eos history as Spark DataFrames: seeds, poison, transactions, the drained outputs.

Why a module of its own: every eos check (:mod:`checkers.eos.checks`, :mod:`checkers.eos.rules`)
reads the same few views of the history (:mod:`checkers.eos.views` joins them once and stores
them beside the run); this dataclass gives both modules the same frames and column names.

Column conventions: input partitions/offsets are ``src_p``/``src_o``; a drained output record
is ``(topic, partition, offset)`` with ``key``, ``value``, ``headers`` (map), ``in_value`` (the
input it came from), ``ident`` (the input's identity, as in :mod:`checkers.eos.pyref`),
``instance``, ``generation``, ``txn_seq`` from its headers.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


@dataclass
class EosFrames:
    """The views of one run every check needs.

    The DataFrames are read from the typed Parquet views :mod:`checkers.eos.views` stores
    beside the run (for a read-only run, in a temporary directory); the plain
    Python fields are the few small facts the checks need as constants.
    """

    hist: DataFrame  # the loaded history, for the full ops shown in examples
    seeds: DataFrame  # value, src_p, src_o, send_index
    poison: DataFrame  # pv
    txns: DataFrame  # instance, txn_seq, inv_index, inv_time, inputs, done_index, done_type, ...
    drain: DataFrame  # see the module docstring; plus inv_index/done_index/inv_time
    committed: DataFrame  # src_p, committed
    fences: DataFrame  # instance, fence_time, fence_index
    finals: DataFrame  # the final process's ops except reads: index, f, type, value
    rebalances: DataFrame  # instance, index, event, generation, partitions (ok callbacks)
    n_out: int
    reads: list[tuple[int, bool]]  # read_committed reads of the output topic: partition, ok
    committed_map: dict[int, int]
    offsets_index: int | None
    output_topic: str | None
    drain_op: dict[str, Any] | None
    persisted: list[DataFrame] = field(default_factory=list)
    idents: DataFrame | None = None  # built on first use by eos_rules.ident_table
    #: The run's transaction.timeout.ms as the history header records it (None if it does not).
    txn_timeout_ms: int | None = None
    #: Per-run helpers built on first use (the broker log join, :mod:`checkers.eos.log`);
    #: anything with a ``release`` method is released with the frames.
    extras: dict[str, Any] = field(default_factory=dict)
    #: Held while a per-run helper is built on first use: the checks run in threads.
    lock: threading.RLock = field(default_factory=threading.RLock)

    @property
    def readable(self) -> list[int]:
        """Output partitions whose read_committed read completed."""
        return sorted({p for p, ok in self.reads if ok})

    def release(self) -> None:
        """Drop frames persisted for this run (the session outlives one check run)."""
        for df in self.persisted:
            df.unpersist()
        self.persisted.clear()
        self.idents = None
        for extra in self.extras.values():
            if hasattr(extra, "release"):
                extra.release()
        self.extras.clear()


# ------------------------------------------------------------------------------------------
# Turning rows into example dicts


def ops_at(fr: EosFrames, indices: list[int]) -> dict[int, dict[str, Any]]:
    """The full ops at these history indices, as they were recorded (value/error decoded)."""
    want = sorted({int(i) for i in indices if i is not None})
    if not want:
        return {}
    rows = fr.hist.filter(F.col("index").isin(want)).orderBy("index", "part").collect()
    out: dict[int, dict[str, Any]] = {}
    for r in rows:
        if r["part"] and int(r["index"]) in out:  # a further slice of a big read's records
            out[int(r["index"])]["value"]["records"] += json.loads(r["value"])["records"]
            continue
        op: dict[str, Any] = {
            "index": r["index"],
            "pindex": r["pindex"],
            "time": r["time"],
            "wall": r["wall"],
            "process": int(r["process"]) if r["process_is_int"] else r["process"],
            "type": r["type"],
            "f": r["f"],
            "value": None if r["value"] is None else json.loads(r["value"]),
        }
        if r["error_json"] is not None:
            op["error"] = json.loads(r["error_json"])
        out[int(r["index"])] = op
    return out
