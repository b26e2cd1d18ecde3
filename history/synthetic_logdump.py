"""A synthetic, valid broker log dump (``evidence/logdump.jsonl``), streamed to disk.

Why: the broker-log checks (:mod:`checkers.logs.checks`) must be measured at millions of
records; three replicas of transactional producers writing TV2-style transactions give a dump
that passes every check, so the benchmark times the checks, not anomaly reporting. A small
one, with a small :mod:`history.synthetic_eos` history, is what :mod:`checkers.warm` checks to
warm a Spark JVM up while a run's load goes on.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

_DATA = (
    '{{"node":{node},"topic":"t","partition":{p},"baseOffset":{o},"lastOffset":{o},"count":1,'
    '"baseSequence":{seq},"lastSequence":{seq},"producerId":{pid},"producerEpoch":{e},'
    '"partitionLeaderEpoch":0,"isTransactional":true,"isControl":false,"offset":{o},'
    '"sequence":{seq},"create_time":{ts},"header_keys":[],"key":"k{pid}",'
    '"payload":"v-{pid}-{e}-{seq}","segment":"00000000000000000000.log","kind":"data"}}\n'
)
_MARKER = (
    '{{"node":{node},"topic":"t","partition":{p},"baseOffset":{o},"lastOffset":{o},"count":1,'
    '"baseSequence":-1,"lastSequence":-1,"producerId":{pid},"producerEpoch":{e},'
    '"partitionLeaderEpoch":0,"isTransactional":true,"isControl":true,"offset":{o},'
    '"sequence":-1,"create_time":{ts},"header_keys":[],"marker":"{m}","coordinator_epoch":0,'
    '"segment":"00000000000000000000.log","kind":"data"}}\n'
)


def _partition_lines(node: int, p: int, n: int, seed: int) -> Any:
    """One replica's records of partition ``p``: ~n records, the same on every node."""
    rng = random.Random(seed * 1_000_003 + p)
    epochs: dict[int, int] = {}
    o, ts = 0, 1_700_000_000_000
    while o < n:
        pid = 1000 + rng.randrange(16)
        e = epochs.get(pid, 0)
        for seq in range(rng.randint(1, 8)):
            yield _DATA.format(node=node, p=p, o=o, seq=seq, pid=pid, e=e, ts=ts)
            o += 1
            ts += 1
        m = "COMMIT" if rng.random() < 0.9 else "ABORT"
        yield _MARKER.format(node=node, p=p, o=o, pid=pid, e=e + 1, ts=ts, m=m)
        o += 1
        epochs[pid] = e + 1


def generate(path: Path, records: int, *, partitions: int = 12, seed: int = 1) -> int:
    """Stream a dump of about ``records`` records (all replicas) to ``path``; returns lines."""
    per_part = records // (3 * partitions)
    n = 0
    with open(path, "w", buffering=1 << 20) as fh:
        fh.write('{"logdump_format": 1, "nodes": 3}\n')
        for node in (1, 2, 3):
            for p in range(partitions):
                for line in _partition_lines(node, p, per_part, seed):
                    fh.write(line)
                    n += 1
    return n
