"""The ``queue`` checker: Jepsen's Kafka anomaly set over a Jepsen-shaped queue history.

Public API::

    check_queue(ops, *, ww_deps=False, sub_via="assign", max_examples=8) -> dict
    load_queue_history(path) -> list[dict]          # raises HistoryInputError
    HistoryInputError                               # one-line reason, CLI exit 2

The verdict follows Jepsen's ``jepsen.tests.kafka/checker``: every anomaly found is reported in
``anomalies``; only those not allowed under the given options make ``valid`` false (see
:func:`allowed_anomaly_types`). This is a pure function of the history: no Kafka, no I/O.
Definitions of each anomaly are in ``docs/anomalies.md``.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from checkers.anomalies import QUEUE, names
from checkers.queue import analysis as qa
from checkers.queue import ordering as qo
from checkers.queue.cycles import build_graph, cycle_cases
from checkers.queue.extract import (
    HistoryInputError,
    LoadedHistory,
    ParsedHistory,
    load_queue_history,
    parse_history,
)

__all__ = [
    "ANOMALY_TYPES",
    "HistoryInputError",
    "allowed_anomaly_types",
    "check_queue",
    "load_queue_history",
]

#: Every anomaly type this checker can report (defined in :mod:`checkers.anomalies`).
ANOMALY_TYPES: tuple[str, ...] = names(QUEUE)

SUB_VIAS = ("assign", "subscribe")


def allowed_anomaly_types(*, ww_deps: bool = False, sub_via: str = "assign") -> frozenset[str]:
    """Anomalies that are reported but do not invalidate the history (Jepsen's rules).

    * ``int-send-skip`` and ``G0``: always. Kafka transactions do not isolate writes, so
      concurrent producers interleave inside one partition.
    * ``poll-skip`` and ``nonmonotonic-poll``: only with ``subscribe``, where the group
      coordinator may move partitions between consumers at any time; with ``assign`` the
      consumer owns its partitions and must read them in order.
    * ``G1c``: only with ``ww_deps``, because ww edges plus unisolated writes produce cycles
      like T1 -ww-> T2 -wr-> T1 routinely; with wr edges alone a cycle is a real anomaly.
    """
    allowed = {"int-send-skip", "G0"}
    if sub_via == "subscribe":
        allowed |= {"poll-skip", "nonmonotonic-poll"}
    if ww_deps:
        allowed.add("G1c")
    return frozenset(allowed)


def _by_delta(reverse: bool) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    def order(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(cases, key=lambda c: c["delta"], reverse=reverse)

    return order


def _by_length(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(cases, key=lambda c: c["length"])


# How examples are chosen: the most severe first (largest skips, most negative deltas,
# shortest cycles); otherwise history order.
_EXAMPLE_ORDER: dict[str, Callable[[list[dict[str, Any]]], list[dict[str, Any]]]] = {
    "poll-skip": _by_delta(True),
    "int-poll-skip": _by_delta(True),
    "int-send-skip": _by_delta(True),
    "nonmonotonic-poll": _by_delta(False),
    "nonmonotonic-send": _by_delta(False),
    "int-nonmonotonic-poll": _by_delta(False),
    "int-nonmonotonic-send": _by_delta(False),
    "G0": _by_length,
    "G1c": _by_length,
}


def _stats(
    parsed: ParsedHistory, a: qa.Analysis, graph_stats: dict[str, int], unseen: list[dict[str, Any]]
) -> dict[str, Any]:
    unseen_by_key: dict[str, int] = {}
    for c in unseen:
        unseen_by_key[c["key"]] = unseen_by_key.get(c["key"], 0) + 1
    counts = parsed.counts
    return {
        "ops": parsed.op_count,
        "ops_by_f_type": dict(sorted(counts.items())),
        "ok_sends": sum(len(p) for t in parsed.txns if t.type == "ok" for p in t.writes.values()),
        "ok_polled_records": sum(
            len(p) for t in parsed.txns if t.type == "ok" for p in t.reads.values()
        ),
        "keys": len(a.logs),
        "log_offsets": sum(len(log.offsets) for log in a.logs.values()),
        "subscribe_ops": counts.get("subscribe:ok", 0),
        "assign_ops": counts.get("assign:ok", 0),
        "unknown_writer_reads": a.unknown_writer_reads,
        "unseen_by_key": {k: unseen_by_key[k] for k in qa.sorted_keys(unseen_by_key)},
        "info_txn_causes": list(parsed.info_errors),
        "graph": graph_stats,
    }


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while building the indexes.

    The analysis allocates millions of small containers and creates no reference cycles, so
    generational collections only rescan live data: pausing them cuts ~30% off a 100k-op check.
    The previous GC state is restored even if the history turns out to be malformed.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def check_queue(
    ops: Iterable[dict[str, Any]],
    *,
    ww_deps: bool = False,
    sub_via: str = "assign",
    max_examples: int = 8,
) -> dict[str, Any]:
    """Check a queue-workload history and return the verdict with counted anomalies.

    ``ops`` is a list of Jepsen-shaped op dicts (invoke and completion). Raises
    :class:`HistoryInputError` if an op is malformed. ``ww_deps`` adds write-write edges
    (successive offsets) to the cycle search; ``sub_via`` says how consumers obtained their
    partitions, which decides whether poll skips are allowed. ``max_examples`` caps the
    examples kept per anomaly type (counts are always complete).
    """
    if sub_via not in SUB_VIAS:
        raise ValueError(f"sub_via must be one of {SUB_VIAS}, not {sub_via!r}")
    if not isinstance(max_examples, int) or max_examples < 0:
        raise ValueError("max_examples must be a non-negative integer")
    notes = list(ops.notes) if isinstance(ops, LoadedHistory) else []
    with _gc_paused():
        return _check(ops, ww_deps, sub_via, max_examples, notes)


def _check(
    ops: Iterable[dict[str, Any]], ww_deps: bool, sub_via: str, max_examples: int, notes: list[str]
) -> dict[str, Any]:
    parsed = parse_history(ops if isinstance(ops, list | tuple) else list(ops))
    a = qa.analyze(parsed)

    cases: dict[str, list[dict[str, Any]]] = {}
    cases["inconsistent-offsets"] = qa.inconsistent_offset_cases(a)
    cases["duplicate"] = qa.duplicate_cases(a)
    cases["G1a"] = qa.g1a_cases(a)
    cases["precommitted-read"] = qa.precommitted_read_cases(a)
    cases["lost-write"] = qa.lost_write_cases(a)
    cases["unseen"] = qa.unseen_cases(a)
    cases["int-poll-skip"], cases["int-nonmonotonic-poll"] = qo.internal_cases(a, writes=False)
    cases["int-send-skip"], cases["int-nonmonotonic-send"] = qo.internal_cases(a, writes=True)
    cases["poll-skip"], cases["nonmonotonic-poll"] = qo.poll_cases(a)
    cases["nonmonotonic-send"] = qo.nonmonotonic_send_cases(a)

    graph = build_graph(a, ww_deps)
    cycles, graph_stats = cycle_cases(a, graph, ww_deps)
    cases.update(cycles)
    if graph.ww_edges + graph.wr_edges == 0:
        cases["empty-transaction-graph"] = [
            {
                "reason": "no dependency edges: no ok/info poll read a value sent by another "
                "ok/info operation" + (" and no ww edges were inferred" if ww_deps else ""),
            }
        ]

    counts = {t: len(cs) for t, cs in sorted(cases.items()) if cs}
    allowed = allowed_anomaly_types(ww_deps=ww_deps, sub_via=sub_via)
    bad = sorted(t for t in counts if t not in allowed)

    examples: dict[str, list[dict[str, Any]]] = {}
    for t in counts:
        order = _EXAMPLE_ORDER.get(t)
        chosen = (order(cases[t]) if order else cases[t])[:max_examples]
        if t in ("inconsistent-offsets", "duplicate"):
            qa.attach_sources(a, chosen)
        examples[t] = chosen

    result: dict[str, Any] = {
        "checker": "queue",
        "valid": not bad,
        "anomalies": counts,
        "anomaly_types": list(counts),
        "bad_anomaly_types": bad,
        "allowed_anomaly_types": sorted(allowed),
        "examples": examples,
        "options": {"ww_deps": ww_deps, "sub_via": sub_via, "max_examples": max_examples},
        "stats": _stats(parsed, a, graph_stats, cases["unseen"]),
    }
    if notes:
        result["input_notes"] = notes
    return result
