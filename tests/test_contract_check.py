"""The client contract's checker (checkers.contract): silent on real runs of both processors,
one line naming the rule for each planted breach; and the processor fix it led to."""

from __future__ import annotations

import copy
import gzip
import io
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from checkers.contract import RULES, check_ops, check_run
from harness.clientcheck import happened

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data" / "eos"
#: Every kept eos history but the Java copier's (Kafka's own tool, wrapped: not a processor of
#: the contract, it records one start and no loop).
KEPT = sorted(p for p in DATA.glob("*.history.jsonl.gz") if not p.name.startswith("eos-java-"))


def _processors(path: Path) -> dict[int, list[tuple[str, Any]]]:
    """A kept merged history's processor ops, per process, in the order each wrote them."""
    by: dict[int, list[tuple[str, Any]]] = defaultdict(list)
    with gzip.open(path, "rt") as fh:
        next(fh)
        for n, line in enumerate(fh, 2):
            op = json.loads(line)
            if isinstance(op["process"], int):
                by[op["process"]].append((f"{path.name}:{n}", op))
    return by


@pytest.mark.parametrize("path", KEPT, ids=[p.name.split(".")[0] for p in KEPT])
def test_real_runs_of_both_processors_keep_the_contract(path: Path) -> None:
    """Python and Java processors, killed, zombied, fenced, at-least-once: no breach."""
    by = _processors(path)
    assert by, "no processor ops"
    breaches = [str(b) for p, ops in by.items() for b in check_ops(p, ops)]
    assert breaches == []


def _clean() -> tuple[int, list[tuple[str, Any]]]:
    by = _processors(DATA / "eos-all-1b90.history.jsonl.gz")
    instance = next(
        p
        for p, ops in sorted(by.items())
        if sum(o["f"] == "txn" for _, o in ops) > 4 and any(o["f"] == "exit" for _, o in ops)
    )
    return instance, copy.deepcopy(by[instance])


def _first(ops: list[tuple[str, Any]], f: str, kind: str) -> int:
    return next(i for i, (_, op) in enumerate(ops) if op["f"] == f and op["type"] == kind)


def _renumber(ops: list[tuple[str, Any]]) -> None:
    times = sorted(op["time"] for _, op in ops)
    for i, (_, op) in enumerate(ops):
        op["pindex"], op["time"] = i, times[i]


def _drop_completion(ops: list[tuple[str, Any]]) -> None:
    del ops[_first(ops, "txn", "ok")]
    _renumber(ops)


def _unknown_op(ops: list[tuple[str, Any]]) -> None:
    i = _first(ops, "rebalance", "invoke")
    ops[i][1]["f"] = ops[i + 1][1]["f"] = "commit"


def _txn_keys(ops: list[tuple[str, Any]]) -> None:
    del ops[_first(ops, "txn", "invoke")][1]["value"]["member_id"]


def _txn_number(ops: list[tuple[str, Any]]) -> None:
    i = _first(ops, "txn", "invoke")
    ops[i][1]["value"]["txn"] = 5
    ops[i + 1][1]["value"]["txn"] = 5


def _outputs(ops: list[tuple[str, Any]]) -> None:
    ops[_first(ops, "txn", "ok")][1]["value"]["outputs"].pop()


def _rebalance(ops: list[tuple[str, Any]]) -> None:
    ops[_first(ops, "rebalance", "ok")][1]["value"]["event"] = "moved"


def _start_late(ops: list[tuple[str, Any]]) -> None:
    start = [ops.pop(0), ops.pop(0)]
    ops[4:4] = start
    _renumber(ops)


def _exit_status(ops: list[tuple[str, Any]]) -> None:
    ops[_first(ops, "exit", "ok")][1]["value"]["code"] = 1


def _time(ops: list[tuple[str, Any]]) -> None:
    ops[6][1]["time"] = ops[5][1]["time"] - 1


PLANTED = {
    "pairing": _drop_completion,
    "op-name": _unknown_op,
    "txn-value": _txn_keys,
    "start-first": _start_late,
    "rebalance-value": _rebalance,
    "exit": _exit_status,
    "op-shape": _time,
}


@pytest.mark.parametrize("rule", [*PLANTED, "txn-number", "outputs"])
def test_each_planted_breach_is_one_line_naming_its_rule(rule: str) -> None:
    instance, ops = _clean()
    assert check_ops(instance, ops) == []
    {"txn-number": _txn_number, "outputs": _outputs, **PLANTED}[rule](ops)
    breaches = check_ops(instance, ops)
    want = rule if rule in RULES else "txn-value"
    assert breaches and {b.rule for b in breaches} == {want}, [str(b) for b in breaches]
    first = str(breaches[0])
    assert "\n" not in first and first.startswith("eos-all-1b90.history.jsonl.gz:")


def _run_dir(tmp_path: Path, returncode: int, code: int | None) -> Path:
    procs = tmp_path / "processes"
    procs.mkdir()
    header = {"history_format": 1, "kind": "process", "process": 0,
              "meta": {"workload": "eos", "role": "processor", "instance": 0}}  # fmt: skip
    ops = [("invoke", "start", {}), ("ok", "start", {})]
    if code is not None:
        ops += [("invoke", "exit", {"reason": "x"}), ("ok", "exit", {"reason": "x", "code": code})]
    lines = [header] + [
        {"index": i, "time": i, "process": 0, "type": t, "f": f, "value": v}
        for i, (t, f, v) in enumerate(ops)
    ]
    (procs / "0.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    exit_op = {"index": 0, "time": 9, "process": "supervisor", "type": "ok", "f": "processor-exit",
               "value": {"instance": 0, "returncode": returncode}}  # fmt: skip
    (procs / "supervisor.jsonl").write_text(
        json.dumps({"history_format": 1}) + "\n" + json.dumps(exit_op) + "\n"
    )
    return tmp_path


@pytest.mark.parametrize(
    ("returncode", "code", "rules"),
    [(0, 0, []), (3, 3, []), (-9, None, []), (1, None, ["exit-status"]), (3, 0, ["exit-status"])],
)
def test_the_supervisor_s_status_must_be_the_recorded_one_or_a_signal(
    tmp_path: Path, returncode: int, code: int | None, rules: list[str]
) -> None:
    breaches = check_run(_run_dir(tmp_path, returncode, code))
    assert [b.rule for b in breaches] == rules, [str(b) for b in breaches]


def test_a_fence_raised_while_delivery_reports_run_is_the_kafka_exception() -> None:
    """confluent-kafka can raise a fatal error while it dispatches delivery reports; CPython
    then reports SystemError caused by it. The processor must see the fence (exit 3 with an
    exit op), not die with status 1: a run on 4.3.1 did, and the contract check caught it."""
    from confluent_kafka import KafkaError, KafkaException

    from workloads.clientinfo import error_info, is_fenced
    from workloads.eos.processor import flush_once

    class Fenced:
        def flush(self, timeout: float) -> int:
            try:
                raise KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
            except KafkaException as exc:
                raise SystemError("<method 'append' of 'list' objects> returned a result") from exc

    class Broken:
        def flush(self, timeout: float) -> int:
            raise SystemError("something else")

    with pytest.raises(KafkaException) as got:
        flush_once(Fenced(), 1.0)
    info = error_info(got.value, "flush")
    assert info["fatal"] and is_fenced(info)
    with pytest.raises(SystemError):
        flush_once(Broken(), 1.0)


# --- python -m harness client-check ------------------------------------------------------


def _harness(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["copier"], "client 'copier' has no processor of the contract"),
        (["python", "--cases", "sigkill,nope"], "--cases: unknown case nope"),
        (["python", "--time-limit", "0"], "--time-limit must be positive"),
    ],
)
def test_client_check_refuses_bad_input_in_one_line(
    argv: list[str], says: str, tmp_path: Path
) -> None:
    proc = _harness("client-check", *argv, "--store", str(tmp_path), timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: ") and says in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not list(tmp_path.iterdir()), "nothing run, nothing written"


def _merged(tmp_path: Path, ops: list[dict[str, Any]]) -> Path:
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in [{"history_format": 1}, *ops]))
    return path


def test_a_case_counts_only_when_its_situation_is_in_the_history(tmp_path: Path) -> None:
    kill = {"process": "supervisor", "type": "ok", "f": "processor-exit",
            "value": {"instance": 0, "returncode": -9}}  # fmt: skip
    stop = {"process": "supervisor", "type": "ok", "f": "processor-exit",
            "value": {"instance": 0, "returncode": 0}}  # fmt: skip
    zombie = {"process": "nemesis", "type": "ok", "f": "start", "value": {"kind": "zombie"}}
    aborted = {"process": "nemesis-clients", "type": "ok", "f": "stop",
               "value": {"kind": "crash-clients", "hit": [{"action": "abort"}]}}  # fmt: skip
    killed_only = {**aborted, "value": {"kind": "crash-clients", "hit": [{"action": "kill"}]}}
    assert happened("sigkill", _merged(tmp_path, [stop, kill]))
    assert not happened("sigkill", _merged(tmp_path, [stop, zombie, aborted]))
    assert happened("zombie", _merged(tmp_path, [zombie]))
    assert not happened("zombie", _merged(tmp_path, [{**zombie, "type": "invoke"}, kill]))
    assert happened("armed", _merged(tmp_path, [killed_only, aborted]))
    assert not happened("armed", _merged(tmp_path, [killed_only, kill]))


def _check_on(cluster: Any, client: str, case: str, root: Path) -> tuple[int, list[str]]:
    """client-check's cases run as the command runs them, on the worker's cluster."""
    from harness.clientcheck import check_client

    out = io.StringIO()
    status = check_client(cluster, client, [case], root, time_limit=12, seed=1, out=out)
    return status, out.getvalue().strip().splitlines()


@pytest.mark.cluster
def test_client_check_holds_the_python_processor_to_the_contract_under_sigkill(
    kafka_cluster: Any, tmp_path: Path
) -> None:
    """A real run (processors SIGKILLed and replaced), read back by the contract's checker:
    the client keeps it, and says so in one line per case."""
    status, lines = _check_on(kafka_cluster, "python", "sigkill", tmp_path)
    assert status == 0, lines
    assert lines[0].startswith("sigkill: kept the contract: ") and "verdict valid" in lines[0]
    assert lines[-1].startswith("client-check python: 1 of 1 cases kept the contract")


@pytest.mark.cluster
def test_client_check_holds_franz_go_to_the_contract_as_a_zombie(
    kafka_cluster: Any, tmp_path: Path
) -> None:
    """The Go processor, built from its manifest, made a zombie on a real cluster: it keeps the
    contract (its rebalance callbacks, which franz-go runs beside the loop, included) and the
    run's verdict is valid."""
    status, lines = _check_on(kafka_cluster, "franz-go", "zombie", tmp_path)
    assert status == 0, lines
    assert lines[0].startswith("zombie: kept the contract: ") and "verdict valid" in lines[0]
    assert lines[-1].startswith("client-check franz-go: 1 of 1 cases kept the contract")


@pytest.mark.cluster
def test_client_check_finds_the_breaches_planted_in_a_broken_client(tmp_path: Path) -> None:
    """A client of the user's own (a manifest in KAFKA_HARNESS_MANIFESTS): the Python processor
    with no exit op and no member id planted. Its run is real (the command's own cluster and
    Spark session); client-check names both rules and exits 1."""
    env = {**os.environ, "KAFKA_HARNESS_MANIFESTS": str(Path(__file__).parent / "data/clients")}
    proc = subprocess.run(
        [
            sys.executable, "-m", "harness", "client-check", "broken-python",
            "--cases", "no-fault", "--time-limit", "8", "--store", str(tmp_path),
        ],
        capture_output=True, text=True, timeout=900, cwd=ROOT, env=env,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("no-fault: BREACH (")
    assert any(": txn-value: " in ln and "member_id" in ln for ln in lines), lines
    assert any(": exit-status: " in ln and "recorded None" in ln for ln in lines), lines
    assert lines[-1].startswith("client-check broken-python: 0 of 1 cases kept the contract")


def test_every_broken_rule_shows_in_client_check_s_output() -> None:
    from checkers.contract import Breach
    from harness.clientcheck import breach_lines

    many = [Breach(f"p/0.jsonl:{n}", "txn-value", "invoke keys") for n in range(100)]
    lines = breach_lines([*many, Breach("supervisor.jsonl:9", "exit-status", "exited 0")])
    assert lines == [
        "p/0.jsonl:0: txn-value: invoke keys",
        "p/0.jsonl:1: txn-value: invoke keys",
        "p/0.jsonl:2: txn-value: invoke keys",
        "(+97 more txn-value)",
        "supervisor.jsonl:9: exit-status: exited 0",
    ]
