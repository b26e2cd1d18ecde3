"""Campaigns: many seeded runs of the same scenario, to measure how often the checkers are right.

A single run says little about a checker: a broken variant may slip through when no fault
hits the window that exposes it, and a false alarm may show up once in ten runs. The issue's
acceptance points are rates (each broken variant caught in >= 9 of 10 seeded runs; no safety
anomaly in 10 seeded correct runs under every fault), so this module runs them:

    python -m harness campaign --runs 10 --nemesis all
    python -m harness campaign --variants at-least-once --nemesis kill-processor,zombie \
--nemesis-interval 3 --nemesis-duration 8 --shared-cluster
    python -m harness campaign --workload NAME --client java --nemesis kafka-17754

A workload declares its variants (``workloads.spec.Variant``): the correct client, expected
valid, and the broken-on-purpose ones, each with the anomaly type it must be caught with; the
first is the default of ``--variants``.

The defaults are `python -m harness run`'s (no faults unless ``--nemesis`` names them; with
them, one fault every ~10 s lasting ~10 s; 60 s of load): a campaign measuring how often the
verdicts are right under faults says ``--nemesis all``.

With ``--shared-cluster`` every run uses one cluster (unique topics, groups and transactional
ids per run) and is judged by the history checks only, which saves a cluster start and a log
dump per run; without it each run is a complete ``python -m harness run`` (fresh cluster,
broker-log evidence included). Results go to ``<store>/campaign/<timestamp>/campaign.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
import traceback
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from common.errors import HarnessError
from harness.run.runner import RunOptions, new_run_dir, run, run_on_shared
from harness.run.verdict import bad_types, explain
from workloads.spec import Variant, WorkloadSpec


def variants_of(spec: WorkloadSpec) -> dict[str, Variant]:
    """A workload's campaign variants by name (one correct variant named after it when it
    declares none)."""
    return {v.name: v for v in spec.variants or (Variant(spec.name),)}


def add_arguments(p: argparse.ArgumentParser) -> None:
    from harness.run.arguments import add_run_arguments
    from harness.run.workloads import DEFAULT, add_workload_flags, get, names
    from harness.substrate.api import add_shape_arguments

    p.add_argument("--workload", choices=names(), default=DEFAULT)
    listed = "; ".join(f"{name}: {', '.join(variants_of(get(name).spec))}" for name in names())
    p.add_argument(
        "--variants",
        default=None,
        help=f"comma list of the workload's variants, the first the default ({listed})",
    )
    p.add_argument("--runs", type=int, default=10, help="seeded runs per variant")
    from checkers.spark import add_master_argument

    add_master_argument(p)
    p.add_argument("--first-seed", type=int, default=1)
    add_run_arguments(p, seeded=False)
    p.add_argument("--shared-cluster", action="store_true")
    # The run's own cluster and workload flags, read the same way (--variants replaces
    # --variant).
    add_shape_arguments(p)
    add_workload_flags(p, names(), skip=("--variant",))


def _options(args: argparse.Namespace, variant: str, seed: int, tag: str) -> RunOptions:
    """One run's options; ``tag`` (empty: none) keeps its topics, groups and transactional
    ids apart from the other runs' on a shared cluster."""
    from harness.run.arguments import options_from_args
    from harness.run.workloads import get

    spec = get(args.workload).spec
    chosen: dict[str, Any] = spec.isolate(tag) if tag else {}
    chosen.update(variants_of(spec)[variant].options)
    # Rejects a flag of the other workload, like `run` does.
    return options_from_args(args, fields=chosen, seed=seed)


def _checked(args: argparse.Namespace, variants: list[str]) -> RunOptions:
    """Every variant's options, checked before the first run (a bad value is one line and
    exit status 2, not ten runs judged unknown); the first variant's."""
    checked = [_options(args, variant, args.first_seed, "") for variant in variants]
    return checked[0]


@contextlib.contextmanager
def _shared(args: argparse.Namespace, root: Path, options: RunOptions) -> Iterator[Any]:
    """At most one Spark session for the whole campaign: each run is judged in this process,
    on the Python engines when its evidence is small, and the first run that needs Spark
    starts the session every later run reuses (its start paid once), ended with the
    campaign. None starts up front: a small campaign runs no JVM, and an interrupt during
    its start could leave one behind. With ``--shared-cluster``, one cluster shaped as
    ``options`` says."""
    from checkers.spark import stop_spark

    try:
        if not args.shared_cluster:
            yield None
            return
        from harness.run.runner import cluster_config_of
        from harness.substrate.process.cluster import Cluster

        with Cluster(cluster_config_of(options, root)) as cluster:
            yield cluster
    finally:
        stop_spark()


def _one(args: argparse.Namespace, cluster: Any, root: Path, variant: str, seed: int) -> dict:
    tag = f"{variant}-s{seed}-{uuid.uuid4().hex[:4]}"
    options = _options(args, variant, seed, tag)
    t0 = time.monotonic()
    try:
        if cluster is None:
            options = replace(options, store=root / "runs")
            result = run(options)
            run_dir, verdict = result.run_dir, result.verdict or {"valid": "unknown"}
        else:
            run_dir = new_run_dir(root / "runs", options.test_name)
            verdict = run_on_shared(cluster, options, run_dir).verdict or {}
    except Exception as e:  # one failed run must not end the campaign
        where = traceback.extract_tb(e.__traceback__)[-1]
        return {
            "variant": variant,
            "seed": seed,
            "valid": "unknown",
            "error": f"{type(e).__name__}: {e} ({Path(where.filename).name}:{where.lineno})",
            "seconds": round(time.monotonic() - t0, 1),
        }
    from harness.nightly.held import late_request_summary

    late = late_request_summary(Path(run_dir))
    return {
        **({"late_requests": late} if late else {}),
        "variant": variant,
        "seed": seed,
        "valid": verdict.get("valid"),
        "bad_anomaly_types": bad_types(verdict) if verdict.get("valid") is False else [],
        "anomalies": verdict.get("anomalies", {}),
        "explain": explain(verdict),
        "run_dir": str(run_dir),
        "seconds": round(time.monotonic() - t0, 1),
    }


def summarize(
    runs: list[dict[str, Any]], variants: dict[str, Variant]
) -> dict[str, dict[str, Any]]:
    """Per variant: how many runs, how many judged as they should be, and the rate."""
    out: dict[str, dict[str, Any]] = {}
    for r in runs:
        v = r["variant"]
        expect = variants[v].expect
        s = out.setdefault(v, {"runs": 0, "as_expected": 0, "unknown": 0, "expect": ""})
        s["runs"] += 1
        if expect is None:
            s["expect"] = "valid (no safety anomaly)"
            ok = r["valid"] is True
        else:
            s["expect"] = f"invalid with {expect}"
            ok = r["valid"] is False and expect in r.get("bad_anomaly_types", [])
        s["as_expected"] += ok
        s["unknown"] += r["valid"] not in (True, False)
    for s in out.values():
        s["rate"] = round(s["as_expected"] / s["runs"], 3) if s["runs"] else 0.0
    return out


def campaign_command(args: argparse.Namespace) -> int:
    from checkers.spark import use_master
    from harness.run.workloads import get

    use_master(args.spark_master)
    known = variants_of(get(args.workload).spec)
    variants = [v.strip() for v in (args.variants or next(iter(known))).split(",") if v.strip()]
    unknown = [v for v in variants if v not in known]
    if unknown or not variants:
        raise HarnessError(
            f"unknown variant(s) {unknown} of the {args.workload} workload; "
            f"known: {', '.join(known)}"
        )
    if args.runs < 1:
        raise HarnessError("--runs must be at least 1")
    first = _checked(args, variants)
    root = new_run_dir(Path(args.store), "campaign")
    out = root / "campaign.json"
    runs: list[dict[str, Any]] = []
    print(f"campaign: {root}", flush=True)
    with _shared(args, root, first) as cluster:
        for variant in variants:
            for seed in range(args.first_seed, args.first_seed + args.runs):
                r = _one(args, cluster, root, variant, seed)
                runs.append(r)
                late = r.get("late_requests")
                print(
                    f"{variant} seed {seed}: {r.get('explain', r.get('error'))} "
                    f"({r['seconds']:.0f} s)" + (f"; late requests: {late}" if late else ""),
                    flush=True,
                )
                doc = {"args": vars(args), "runs": runs, "summary": summarize(runs, known)}
                out.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    summary = summarize(runs, known)
    for variant, s in summary.items():
        print(
            f"{variant}: {s['as_expected']}/{s['runs']} {s['expect']} "
            f"(unknown {s['unknown']}; rate {s['rate']:.0%})"
        )
    target = {v: (1.0 if known[v].expect is None else 0.9) for v in summary}
    return 0 if all(s["rate"] >= target[v] for v, s in summary.items()) else 1
