"""KAFKA-20634's window on a real cluster: does a group coordinator that has just lost its
``__consumer_offsets`` partitions apply the new leader's high watermark before it unloads,
and is an acknowledged offset commit then lost?

One run: a 3-node cluster (``offsets.commit.timeout.ms=30000``, so pending commits outlive
the cut). Victim groups commit one offset at a time (synchronously, recording each
acknowledgement); loader groups keep the coordinators busy with commits of many partitions.
The broker that coordinates the most victims is cut from the controller quorum only (its
controller port; replication still flows), so it keeps acting as coordinator while the
controller fences it and moves its partitions. Late groups then commit through the new
coordinators, so the new leaders write past the divergence point. The cut heals: the old
coordinator becomes a follower, truncates, fetches, and unloads.

Per run it prints: the ``__consumer_offsets`` partitions the old coordinator truncated
before it scheduled their unloading (the window open), its "HighWatermarkUpdate failed" lines
(the bug's logged symptom: the new leader's high watermark passed the old coordinator's own
writes), and victims whose committed offset afterwards is below an acknowledged commit
(the harmful case), and where the brokers' logs are. Kafka 4.3.1 and 4.4.0 gate the callback
(the fix); 4.3.0 does not.

Left to itself the window opens seldom (finding F14 in docs/findings.md). ``--aim`` puts
every victim and late group on the cut broker's partitions and the loaders elsewhere, and
``--broker-patch resignation-delay`` makes the brokers slow to unload a coordinator, which
opens the window every time:

    .venv/bin/python bench/kafka_20634_window.py --kafka-version 4.3.0 --runs 4 \
        --broker-patch resignation-delay --aim --late-partitions 1 --late-groups 12
"""

from __future__ import annotations

import argparse
import contextlib
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition

from common.errors import HarnessError
from common.waits import WaitTimeout, wait_for
from harness.substrate.api import ClusterConfig
from harness.substrate.backends import open_cluster
from harness.substrate.process.network import CHAIN
from harness.substrate.process.node import CONTROLLER_PORT

OFFSETS = "__consumer_offsets"
_STAMP = r"^\[(\S+ \S+)\]"


class Victims:
    """Groups that each commit offsets 1, 2, 3... synchronously and record every answer."""

    def __init__(self, boot: str, groups: list[str]) -> None:
        self.boot, self.groups = boot, groups
        self.acked: dict[str, int] = {}
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._loop, args=(g,), daemon=True) for g in self.groups
        ]

    def _loop(self, group: str) -> None:
        c = Consumer({"bootstrap.servers": self.boot, "group.id": group})
        n = 0
        while not self.stop.is_set():
            n += 1
            try:
                c.commit(offsets=[TopicPartition("t", 0, n)], asynchronous=False)
                self.acked[group] = n
            except KafkaException:
                pass
            time.sleep(0.02)
        c.close()


def _commit_loop(boot: str, groups: list[str], partitions: int, stop: threading.Event) -> None:
    consumers = [Consumer({"bootstrap.servers": boot, "group.id": g}) for g in groups]
    n = 0
    while not stop.is_set():
        n += 1
        for c in consumers:
            offsets = [TopicPartition("load", p, n) for p in range(partitions)]
            with contextlib.suppress(KafkaException):
                c.commit(offsets=offsets, asynchronous=True)
            c.poll(0)
        time.sleep(0.05)
    for c in consumers:
        c.close()


def _late_commits(boot: str, groups: list[str], partitions: int) -> None:
    """One commit of ``partitions`` offsets per group, through the new coordinators, sent
    asynchronously and left to the consumer's close. The rates in docs/findings.md were
    measured so; acknowledging each commit before the next (``asynchronous=False``) slows
    this phase, and the window then stayed shut in 10 of 10 runs on 4.3.0."""
    offsets = [TopicPartition("late", p, 1) for p in range(partitions)]
    for g in groups:
        c = Consumer({"bootstrap.servers": boot, "group.id": g})
        # Queuing it raises while the client has no coordinator to send it to yet.
        wait_for(
            lambda c=c: c.commit(offsets=offsets, asynchronous=True) is None,
            timeout=20,
            what=f"{g}'s commit",
        )
        c.close()


def _cut_controller(netns: str) -> None:
    for flag in ("--dport", "--sport"):
        rule = ["-A", CHAIN, "-p", "tcp", flag, str(CONTROLLER_PORT), "-j", "DROP"]
        subprocess.run(["ip", "netns", "exec", netns, "iptables", "-w", *rule], check=True)


def window(log: Path, since: str) -> tuple[list[int], int]:
    """(partitions truncated before their unload was scheduled, HighWatermarkUpdate
    failures), from the old coordinator's log lines stamped at or after ``since``. The
    unload runs on the coordinator's event loop after it is scheduled, so a truncation
    before the scheduling lets the new leader's high watermark in first."""
    truncated: dict[int, str] = {}
    unloading: dict[int, str] = {}
    failed = 0
    for line in log.read_text(errors="replace").splitlines():
        m = re.match(_STAMP, line)
        if not m or m.group(1) < since:
            continue
        if "Execution of HighWatermarkUpdate failed" in line:
            failed += 1
        t = re.search(rf"Truncating partition {OFFSETS}-(\d+) ", line)
        if t:
            truncated.setdefault(int(t.group(1)), m.group(1))
        u = re.search(rf"Scheduling unloading of metadata for {OFFSETS}-(\d+) ", line)
        if u:
            unloading.setdefault(int(u.group(1)), m.group(1))
    opened = [p for p, at in truncated.items() if p in unloading and at < unloading[p]]
    return sorted(opened), failed


def one(
    version: str,
    cut_s: float,
    late_partitions: int,
    load_partitions: int,
    late_groups: int,
    aim: bool,
    patch: str | None = None,
) -> dict[str, object]:
    cfg = ClusterConfig(
        kafka_version=version,
        dump_logs=False,
        broker_patch=patch,  # the brokers' server.log files are what it reads; no segment dump
        broker_settings={
            "offsets.commit.timeout.ms": "30000",
            "broker.session.timeout.ms": "6000",
            "broker.heartbeat.interval.ms": "1000",
        },
    )
    with open_cluster(cfg, "process") as cl:
        if not cl.uses_netns:
            raise HarnessError("the controller-only cut needs network namespaces (root)")
        for topic, parts in (("t", 1), ("load", 100), ("late", late_partitions)):
            cl.ensure_topic(topic, parts, replication=1 if topic != "t" else None)
        leaders = {p: cl.leader(OFFSETS, p) for p in range(cl.partition_count(OFFSETS))}

        def node_of(group: str) -> int | None:
            return leaders[cl.coordinator_partition(OFFSETS, group)]

        def named(prefix: str, n: int, where=lambda node: True) -> list[str]:
            return [g for i in range(100 * n) if where(node_of(g := f"{prefix}-{i}"))][:n]

        if aim:
            target = leaders[0]
            victims = Victims(cl.bootstrap, named("victim", 40, lambda n: n == target))
            loaders = named("load", 20, lambda n: n != target)
            late = named("late", late_groups, lambda n: n == target)
        else:
            victims = Victims(cl.bootstrap, named("victim", 40))
            loaders, late = named("load", 20), named("late", late_groups)
        where = {g: node_of(g) for g in victims.groups}
        target = Counter(where.values()).most_common(1)[0][0]
        stop_load = threading.Event()
        load = [
            threading.Thread(
                target=_commit_loop,
                args=(cl.bootstrap, group, load_partitions, stop_load),
                daemon=True,
            )
            for group in (loaders[0::3], loaders[1::3], loaders[2::3])
        ]
        for t in victims.threads + load:
            t.start()
        time.sleep(4)
        _cut_controller(cl.net.node(target).netns)
        t_cut = time.monotonic()
        since = time.strftime("%Y-%m-%d %H:%M:%S")
        moved = cl.coordinator_partition(OFFSETS, next(g for g, n in where.items() if n == target))
        wait_for(
            lambda: cl.leader(OFFSETS, moved) not in (target, None),
            timeout=60,
            what=f"{OFFSETS}-{moved} to move off node {target}",
        )
        boots = dict(zip(cl.node_ids(), cl.bootstrap.split(","), strict=True))
        majority = ",".join(b for n, b in boots.items() if n != target)
        _late_commits(majority, late, late_partitions)
        time.sleep(max(0.0, cut_s - (time.monotonic() - t_cut)))
        cl.heal()
        victims.stop.set()
        for t in victims.threads:
            t.join()
        stop_load.set()
        for t in load:
            t.join()
        lost = []
        for g, acked in victims.acked.items():
            c = Consumer({"bootstrap.servers": cl.internal_bootstrap, "group.id": g})
            got = c.committed([TopicPartition("t", 0)], timeout=20)[0].offset
            c.close()
            if got < acked:
                lost.append((g, got, acked))
        opened, failed = window(cl.dir / "nodes" / f"n{target}" / "server.log", since)
    return {
        "target": target,
        "window": opened,
        "hwm_failed": failed,
        "lost": lost,
        "logs": str(cl.dir / "nodes"),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kafka-version", required=True)
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--cut", type=float, default=18.0, help="seconds the cut lasts")
    p.add_argument(
        "--late-partitions",
        type=int,
        default=5,
        metavar="N",
        help="offsets each late group commits: how far the new leaders write past the divergence",
    )
    p.add_argument(
        "--load-partitions",
        type=int,
        default=100,
        metavar="N",
        help="offsets each loader group commits at a time (1: every write a batch of its own)",
    )
    p.add_argument("--late-groups", type=int, default=40, metavar="N")
    p.add_argument(
        "--aim",
        action="store_true",
        help="victims and late groups on the cut broker's partitions, loaders elsewhere",
    )
    p.add_argument("--broker-patch", default=None, metavar="NAME")
    a = p.parse_args()
    for i in range(a.runs):
        try:
            r = one(
                a.kafka_version,
                a.cut,
                a.late_partitions,
                a.load_partitions,
                a.late_groups,
                a.aim,
                a.broker_patch,
            )
        except (HarnessError, WaitTimeout) as e:
            sys.exit(f"kafka_20634_window: {e}")
        print(f"{a.kafka_version} run {i + 1}: {r}", flush=True)


if __name__ == "__main__":
    main()
