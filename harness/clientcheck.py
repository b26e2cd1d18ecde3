"""``python -m harness client-check CLIENT``: does a client's eos processor keep the contract?

Why: a verdict about a client is only as good as what its processors recorded. Before a
client's runs are trusted (or it enters the matrix), short real runs put it through the
situations the contract speaks of (a clean stop, a SIGKILL, a zombie, a moment armed
through the arm file) and :mod:`checkers.contract` reads every history it wrote. Each breach
is one line naming the file, the op and the rule. The runs' verdicts are printed but do not
decide: conformance is about what the client records, not about whether Kafka and the client
kept exactly-once (a campaign says that).

Exit status: 0 every case kept the contract, 1 a breach (or a case whose run could not be
recorded), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from checkers.contract import Breach, check_run
from common.errors import HarnessError
from harness.kafka.versions import DEFAULT_KAFKA_VERSION
from harness.run.options import RunOptions
from workloads import client_registry

if TYPE_CHECKING:
    from harness.substrate.api import Cluster

log = logging.getLogger(__name__)

#: The cases, in order: name -> the fault kinds of its run.
CASES = {
    "no-fault": "none",
    "sigkill": "kill-processor",
    "zombie": "zombie",
    "armed": "crash-clients",
}
#: What must be in a case's history for the case to have happened (a run too short for its
#: fault proves nothing about how the client records it).
NEEDS = {
    "sigkill": "a processor SIGKILLed",
    "zombie": "a processor made a zombie",
    "armed": "a transaction aborted at a moment armed through the arm file",
}
#: The clients whose manifests say their processors implement the contract (Kafka's copier
#: does not: it is Kafka's own tool, wrapped).
CONTRACT_CLIENTS = client_registry.contract_clients()


def add_arguments(p: argparse.ArgumentParser) -> None:
    from harness.run.arguments import add_run_arguments

    p.add_argument("client", metavar="CLIENT", help=f"one of: {', '.join(CONTRACT_CLIENTS)}")
    p.add_argument(
        "--cases",
        default=",".join(CASES),
        metavar="NAMES",
        help=f"which cases, comma-separated (default all: {', '.join(CASES)})",
    )
    # Each case's faults are its own: no --nemesis.
    add_run_arguments(p, time_limit=20.0, seed=1, nemesis=False)


def _cases(spec: str) -> list[str]:
    names = [c.strip() for c in spec.split(",") if c.strip()]
    unknown = [c for c in names if c not in CASES]
    if unknown or not names:
        raise HarnessError(
            f"--cases: unknown case {', '.join(unknown) or '(none given)'}; "
            f"known: {', '.join(CASES)}"
        )
    return names


def case_options(args: argparse.Namespace, case: str, store: Path) -> RunOptions:
    """The options of one case's run: the client's eos processors (``args.client``) under the
    case's faults, with topics, group and transactional ids of the case's own (the cases share
    a cluster); ``args`` as the command's flags give them."""
    from harness.run.arguments import options_from_args
    from harness.run.workloads import get as get_workload

    tag = f"cc-{case}-{uuid.uuid4().hex[:6]}"
    return options_from_args(
        args,
        fields={**get_workload("eos").spec.isolate(tag), "session_timeout_ms": 6000},
        workload="eos",
        store=store,
        nemesis=CASES[case],
        nemesis_interval=3.0,
        nemesis_duration=4.0,
    )


def run_case(cluster: Cluster, options: RunOptions, case: str) -> tuple[list[Breach], str]:
    """One case's run on ``cluster``, judged and reported; its breaches and a summary."""
    from harness.report import write_report
    from harness.run.runner import new_run_dir, run_on_shared

    run_dir = new_run_dir(options.store, options.test_name)
    try:
        results = run_on_shared(cluster, options, run_dir).verdict or {}
        write_report(run_dir)
    except Exception as exc:  # the case could not be recorded: say so, go on to the next
        log.exception("client-check case %s", case)
        return [Breach(str(run_dir), "run", f"the run ended without a verdict: {exc}")], ""
    breaches = check_run(run_dir)
    if case in NEEDS and not happened(case, run_dir / "history.jsonl"):
        breaches.append(Breach(str(run_dir), "case", f"did not happen: no {NEEDS[case]}"))
    anomalies = ", ".join(f"{k} x{v}" for k, v in sorted((results.get("anomalies") or {}).items()))
    processors = len([p for p in (run_dir / "processes").glob("*.jsonl") if p.stem.isdigit()])
    verdict = "valid" if results.get("valid") is True else f"invalid ({anomalies})"
    return breaches, f"{processors} processor histories, verdict {verdict}; {run_dir}"


def check_client(
    cluster: Cluster,
    client: str,
    cases: list[str],
    root: Path,
    *,
    time_limit: float,
    seed: int,
    kafka_version: str = DEFAULT_KAFKA_VERSION,
    transaction_version: int | None = None,
    out: TextIO = sys.stdout,
) -> int:
    """Every case, one after the other, on ``cluster`` (healed between cases by each run's
    nemesis); one line per case (and per breach) on ``out``; the exit status."""
    args = argparse.Namespace(
        client=client, time_limit=time_limit, seed=seed, kafka_version=kafka_version,
        transaction_version=transaction_version,
    )  # fmt: skip
    failed = 0
    for case in cases:
        options = case_options(args, case, root / "cases" / case)
        breaches, summary = run_case(cluster, options, case)
        if breaches:
            failed += 1
            print(f"{case}: BREACH ({len(breaches)})", file=out, flush=True)
            for line in breach_lines(breaches):
                print(f"  {line}", file=out, flush=True)
        else:
            print(f"{case}: kept the contract: {summary}", file=out, flush=True)
    print(
        f"client-check {client}: {len(cases) - failed} of {len(cases)} cases kept the "
        f"contract; {root}",
        file=out,
    )
    return 1 if failed else 0


def _shows(case: str, op: dict[str, Any]) -> bool:
    value = op.get("value") if isinstance(op.get("value"), dict) else {}
    by_nemesis = str(op.get("process")).startswith("nemesis")
    if case == "sigkill":
        return op["f"] == "processor-exit" and value.get("returncode") == -9
    if case == "zombie":
        return by_nemesis and op["f"] == "start" and value.get("kind") == "zombie"
    hits = (value.get("hit") or []) if by_nemesis and op["f"] == "stop" else []
    return case == "armed" and any(h.get("action") == "abort" for h in hits)


def happened(case: str, history: Path) -> bool:
    """Does the run's merged history show the case's situation?"""
    with open(history, encoding="utf-8", errors="replace") as fh:
        next(fh, None)
        return any(op.get("type") == "ok" and _shows(case, op) for op in map(json.loads, fh))


def breach_lines(breaches: list[Breach], per_rule: int = 3) -> list[str]:
    """The first few breaches of every rule that broke, in the order they were found, and how
    many more each rule has: one rule broken a hundred times must not hide another."""
    by_rule: dict[str, list[Breach]] = {}
    for b in breaches:
        by_rule.setdefault(b.rule, []).append(b)
    out = []
    for rule, found in by_rule.items():
        out += [str(b) for b in found[:per_rule]]
        if len(found) > per_rule:
            out.append(f"(+{len(found) - per_rule} more {rule})")
    return out


def client_check_command(args: argparse.Namespace) -> int:
    from checkers.spark import start_spark, stop_spark
    from harness.run.runner import cluster_config_of
    from harness.substrate.backends import open_cluster

    if args.client not in CONTRACT_CLIENTS:
        raise HarnessError(
            f"client {args.client!r} has no processor of the contract; "
            f"known: {', '.join(CONTRACT_CLIENTS)}"
        )
    cases = _cases(args.cases)
    root = Path(args.store) / "client-check" / args.client / time.strftime("%Y%m%dT%H%M%S")
    # Checks every flag (the client's options against its manifest included) once, before
    # the cluster starts.
    first = case_options(args, cases[0], root)
    # One cluster and one Spark session for every case: a case's faults are healed when its
    # run ends, and its names are its own.
    start_spark()
    try:
        with open_cluster(cluster_config_of(first, root / "cluster"), first.backend) as cluster:
            return check_client(
                cluster, args.client, cases, root, time_limit=args.time_limit,
                seed=args.seed, kafka_version=args.kafka_version,
                transaction_version=args.transaction_version,
            )  # fmt: skip
    finally:
        stop_spark()
