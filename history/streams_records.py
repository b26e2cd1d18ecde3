"""The streams workload's record contract: output headers, the group key and the aggregate.

Why in ``history/``: the final reads carry these records verbatim, and the checkers judge
them through exactly these names and rules. The writer is the Java application
(``workloads/java/streams/kafkaharness/StreamsApp.java``, which spells the same names); the
readers are the streams checkers and the driver's tally. Documented in
``docs/history-format.md``, workload "streams". Pure: no I/O.
"""

from __future__ import annotations

from typing import Final

#: Headers of every output and aggregate record (UTF-8 text; numbers in decimal).
H_SRC_PARTITION: Final = "src-partition"
H_SRC_OFFSET: Final = "src-offset"
H_SRC_VALUE: Final = "src-value"
H_INSTANCE: Final = "instance"
H_TASK: Final = "task"
H_THREAD: Final = "thread"

#: The stateless output of input ``v`` is ``OUTPUT_PREFIX + v`` (as in the eos workload).
OUTPUT_PREFIX: Final = "out-"


def number(value: str) -> int:
    """The number a seeded value carries (``v000123`` -> 123): what the aggregate sums."""
    return int(value[1:])


def group_key(value: str, partition: int, groups: int) -> str:
    """The key an input is counted under: its partition and ``groups`` buckets of its number
    (so a key's inputs all live in one input partition, one task, in offset order). The
    number is divided by 7 first so that the seeder's round robin over the partitions still
    spreads each partition's inputs over every bucket."""
    return f"p{partition}-g{number(value) // 7 % groups}"


def aggregate_value(count: int, total: int) -> str:
    """An aggregate record's value (and the store's, and its changelog's): ``count,sum``."""
    return f"{count},{total}"


def parse_aggregate(text: str | None) -> tuple[int, int] | None:
    """The inverse of :func:`aggregate_value`; None for anything else (a tombstone)."""
    if text is None:
        return None
    try:
        count, total = text.split(",")
        return int(count), int(total)
    except ValueError:
        return None
