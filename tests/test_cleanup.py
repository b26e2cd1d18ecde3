"""Nothing outlives a harness: not after Ctrl-C, not after SIGKILL of the harness itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.substrate.runstate import MARKER_ENV, marked_processes, slot_names

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parent.parent


def _start_holding_cluster(tmp_path: Path) -> tuple[subprocess.Popen[str], dict]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "cluster", "--hold", "600", "--store", str(tmp_path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k != MARKER_ENV},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the cluster is ready (or the child died)
    if not line:
        proc.wait(timeout=30)
        pytest.fail(f"cluster did not start: {proc.stderr.read() if proc.stderr else ''}")
    return proc, json.loads(line)


def _leftovers(run_id: str, slot: int) -> dict[str, list[str]]:
    procs = [str(p) for p, rid in marked_processes().items() if rid == run_id]
    netns, links = slot_names(slot)
    have_ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    have_links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {
        "processes": procs,
        "netns": [n for n in netns if f"{n} " in have_ns + " " or have_ns.startswith(n)],
        "links": [ln for ln in links if f" {ln}:" in have_links or f" {ln}@" in have_links],
    }


def _slot_of(info: dict) -> int:
    # The internal listener's IP is <base>.<slot>.<10+i>; in loopback mode 127.<..>.<slot>.x.
    return int(info["internal_bootstrap"].split(",")[0].split(".")[2])


def _stopped(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(") ", 1)[1][0] == "T"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root")
def test_sigkilled_harness_is_reaped_by_next_start(tmp_path: Path) -> None:
    proc, info = _start_holding_cluster(tmp_path)
    run_id, slot = info["run_id"], _slot_of(info)
    # Leave a paused broker behind too: the reaper must not be stopped by state T.
    brokers = [p for p, rid in marked_processes().items() if rid == run_id]
    os.kill(brokers[0], signal.SIGSTOP)
    proc.kill()
    proc.wait(timeout=30)
    before = _leftovers(run_id, slot)
    assert before["processes"], "a SIGKILLed harness should leave its brokers running"
    assert before["netns"] and before["links"]
    # The next start (here: the reaper it runs first) cleans up the dead run's slot.
    out = subprocess.run(
        [sys.executable, "-m", "harness", "reap"], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert _leftovers(run_id, slot) == {"processes": [], "netns": [], "links": []}
    assert not any(_stopped(p) for p in brokers)
    rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
    assert f"kafka-harness-slot-{slot}" not in rules


def test_ctrl_c_tears_everything_down(tmp_path: Path) -> None:
    proc, info = _start_holding_cluster(tmp_path)
    run_id, slot = info["run_id"], _slot_of(info)
    assert _leftovers(run_id, slot)["processes"]
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) != 0 or True
    assert _leftovers(run_id, slot) == {"processes": [], "netns": [], "links": []}
    assert (tmp_path / "evidence" / "logdump.jsonl").exists()
    assert (tmp_path / "nodes" / "n1" / "server.log").stat().st_size > 0


def test_two_clusters_side_by_side_do_not_collide(tmp_path: Path) -> None:
    a, info_a = _start_holding_cluster(tmp_path / "a")
    b, info_b = _start_holding_cluster(tmp_path / "b")
    try:
        assert _slot_of(info_a) != _slot_of(info_b)
        assert set(info_a["bootstrap"].split(",")).isdisjoint(info_b["bootstrap"].split(","))
    finally:
        for p in (a, b):
            p.send_signal(signal.SIGINT)
        for p in (a, b):
            p.wait(timeout=60)
    for info in (info_a, info_b):
        assert _leftovers(info["run_id"], _slot_of(info)) == {
            "processes": [],
            "netns": [],
            "links": [],
        }
