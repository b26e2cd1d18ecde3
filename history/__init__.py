"""History format v1: the contract between workloads, nemeses and checkers.

Writers use :class:`Recorder` (one per process, one file each); the harness merges the files
with :func:`merge_histories`; checkers read the result with :func:`load_history` or, for big
runs, :func:`iter_history`. The format itself is specified in ``docs/history-format.md``.
"""

from __future__ import annotations

from history.merge import MergeSummary, merge_histories, merge_key
from history.reader import (
    HistoryReader,
    HistoryWarning,
    iter_history,
    iter_process_file,
    load_history,
    read_process_file,
)
from history.recorder import Recorder, wall_now
from history.schema import (
    FORMAT_VERSION,
    NEMESIS_PROCESSES,
    OP_TYPES,
    Header,
    HistoryError,
    Op,
    OpType,
    Process,
    UnsupportedFormatError,
    check_pairing,
    is_nemesis,
    validate_header,
    validate_op,
)

__all__ = [
    "FORMAT_VERSION",
    "NEMESIS_PROCESSES",
    "OP_TYPES",
    "Header",
    "HistoryError",
    "HistoryReader",
    "HistoryWarning",
    "MergeSummary",
    "Op",
    "OpType",
    "Process",
    "Recorder",
    "UnsupportedFormatError",
    "check_pairing",
    "is_nemesis",
    "iter_history",
    "iter_process_file",
    "load_history",
    "merge_histories",
    "merge_key",
    "read_process_file",
    "validate_header",
    "validate_op",
    "wall_now",
]
