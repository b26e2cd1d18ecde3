"""``python -m harness matrix``: every scenario of a set against every chosen Kafka version.

Why: a single run says whether exactly-once held once, on one version. A nightly matrix says,
per released Kafka version, which scenarios hold, which broken variants are still caught, and
-- with the trends (``harness.nightly.trends``) -- what changed since earlier nights.

Each cell is a child ``python -m harness run ... --store <matrix dir>/cells/<cell id>``
(``harness.nightly.cells``), run one after another (one cluster at a time). Outputs go to
``<store>/matrix/<UTC timestamp>/``: ``matrix.json``, ``matrix.html``, ``junit.xml``; and
``<store>/versions-seen.json`` records which versions are no longer new.

Exit status: 0 when every cell came out as expected, 1 otherwise; with
``--fail-on-new-safety-anomaly``, 1 only when a cell expected valid shows a safety anomaly type
that no earlier matrix run showed for that version and scenario; 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

from common.errors import HarnessError
from harness.kafka.security import MODES
from harness.kafka.versions import KafkaVersion, nearest_versions, released_versions, sort_versions
from harness.nightly.cells import base_record, run_cell
from harness.nightly.output import write_json_atomic, write_outputs
from harness.nightly.scenarios import SCENARIO_SETS, Cell, expand, resolve_scenarios, security_gap
from harness.nightly.trends_data import matrix_root, new_safety_anomalies, seen_safety_types
from harness.storefiles import new_unique_dir
from workloads import client_registry

log = logging.getLogger("harness.nightly.matrix")


def add_matrix_arguments(p: argparse.ArgumentParser) -> None:
    from checkers.spark import add_master_argument

    add_master_argument(p)
    sel = p.add_argument_group("versions (default: --latest 2)")
    sel.add_argument("--versions", default=None, metavar="V,V", help="e.g. 3.9.2,4.3.1")
    sel.add_argument(
        "--latest",
        type=int,
        default=None,
        metavar="N",
        help="the newest release of each of the N newest minor lines (with --new: only when "
        "nothing is new)",
    )
    sel.add_argument(
        "--new", action="store_true", help="versions released since the last matrix run"
    )
    p.add_argument(
        "--scenarios",
        default="smoke",
        metavar="SET|NAMES",
        help=f"a set ({', '.join(SCENARIO_SETS)}) or a comma list of scenario names",
    )
    p.add_argument("--store", default="store", metavar="DIR")
    p.add_argument(
        "--security",
        choices=MODES,
        default="plaintext",
        help="every cell's (docs/substrate.md, secured clusters); a secured matrix runs the "
        "scenarios whose workload and client take it and says which it left out",
    )
    p.add_argument("--time-limit", type=float, default=None, metavar="S", help="every cell's")
    p.add_argument("--seed", type=int, default=None, help="passed to every cell (default random)")
    p.add_argument("--junit", default=None, metavar="FILE", help="also write junit.xml here")
    p.add_argument(
        "--fail-on-new-safety-anomaly",
        action="store_true",
        help="exit 1 only for a safety anomaly type new for its version and scenario",
    )


# --- versions ----------------------------------------------------------------------------


def seen_file(store: Path) -> Path:
    return Path(store) / "versions-seen.json"


def load_seen(store: Path) -> set[str] | None:
    """Versions no longer new (None before the first matrix run)."""
    try:
        data = json.loads(seen_file(store).read_text())
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise HarnessError(f"{seen_file(store)} is not valid JSON: {exc}") from None
    return {str(v) for v in data}


def latest_lines(available: list[str], n: int) -> list[str]:
    """The newest release of each of the ``n`` newest minor lines, newest first."""
    out: list[str] = []
    lines: set[tuple[int, int]] = set()
    for text in sort_versions(available):
        v = KafkaVersion(text)
        if (v.major, v.minor) not in lines:
            lines.add((v.major, v.minor))
            out.append(text)
    return out[:n]


def choose_versions(
    args: argparse.Namespace, available: list[str] | None, seen: set[str] | None
) -> list[str]:
    """The versions to run, from the selection options; bad input raises HarnessError."""
    if args.versions:
        if args.new or args.latest is not None:
            raise HarnessError("--versions cannot be combined with --new or --latest")
        wanted = list(dict.fromkeys(v.strip() for v in args.versions.split(",") if v.strip()))
        if not wanted:
            raise HarnessError("--versions names no version")
        for v in wanted:
            KafkaVersion(v)  # a one-line error for garbage
            if available is not None and v not in available:
                near = ", ".join(nearest_versions(v, available))
                raise HarnessError(
                    f"Kafka {v} is not a released, supported version on Maven Central; "
                    f"nearest: {near}"
                )
        return wanted
    if available is None:
        raise HarnessError("cannot list versions without Maven Central; pass --versions")
    if args.latest is not None and args.latest < 1:
        raise HarnessError("--latest must be at least 1")
    if args.new:
        new = [v for v in available if seen is not None and v not in seen]
        if new or args.latest is None:
            return sort_versions(new)
    return latest_lines(available, args.latest or 2)


def update_seen(store: Path, available: list[str] | None, tested: list[str]) -> None:
    """A version stops being new once a matrix has run it. The first matrix run also records
    every version then released as the baseline (otherwise all history would be "new")."""
    seen = load_seen(store)
    if seen is None:
        seen = set(available or [])
    seen.update(tested)
    write_json_atomic(seen_file(store), sort_versions(sorted(seen)))


# --- running -----------------------------------------------------------------------------


def new_matrix_dir(store: Path) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return new_unique_dir(matrix_root(store).resolve(), stamp, "matrix directory")


def _install_error_record(cell: Cell, error: str) -> dict[str, Any]:
    return {
        **base_record(cell),
        "verdict_source": "install",
        "message": f"Kafka {cell.version} could not be installed: {error}",
    }


#: Clients built by the project for each Kafka version (its Java clients, compiled against the
#: version's jars: manifests of build kind ``kafka-java``); a cell of one of them cannot run
#: where they do not compile.
BUILT_CLIENTS = frozenset(
    name for name, m in client_registry.manifests().items() if m.build_kind == "kafka-java"
)


def _prepare(version: str, java: bool) -> tuple[str | None, str | None]:
    """Install a version once before its cells and, when a cell needs them, build the
    project's Java clients on that installation: (install error, javac's first error)."""
    from harness.kafka.install import ensure_installed
    from harness.kafka.javaclients import BuildError, ensure_built

    try:
        install = ensure_installed(version)
    except HarnessError as exc:
        return str(exc), None
    if not java:
        return None, None
    try:
        ensure_built(install)
    except BuildError as exc:
        return None, exc.first_error
    return None, None


def not_built_record(cell: Cell, error: str) -> dict[str, Any]:
    """A cell whose client does not build for its version: no run, the compiler's word."""
    return {
        **base_record(cell),
        "verdict_source": "build",
        "build_error": error,
        "message": f"not built: {error}",
    }


def matrix_command(args: argparse.Namespace) -> int:
    from checkers.spark import use_master

    use_master(args.spark_master)
    store = Path(args.store)
    scenarios = resolve_scenarios(args.scenarios)
    if args.time_limit is not None and args.time_limit <= 0:
        raise HarnessError("--time-limit must be positive")
    seen = load_seen(store)
    try:
        available: list[str] | None = released_versions()
    except HarnessError as exc:
        if not args.versions:
            raise
        log.warning("%s; running the given versions unchecked", exc)
        available = None
    versions = choose_versions(args, available, seen)
    if not versions:
        print("matrix: no new Kafka version since the last matrix run; nothing to do")
        return 0
    cells = expand(versions, scenarios, args.time_limit, args.security)
    left_out = sorted(s.name for s in scenarios if security_gap(s, args.security) is not None)
    if left_out:
        print(f"matrix: --security {args.security} leaves out {', '.join(left_out)}")
    if not cells:
        raise HarnessError(f"--security {args.security}: no scenario of the set can run secured")
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    out_dir = new_matrix_dir(store)
    earlier = seen_safety_types(store, exclude=out_dir)
    t0 = time.monotonic()
    matrix: dict[str, Any] = {
        "matrix_format": 1,
        "id": out_dir.name,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "finished": None,
        "wall_s": None,
        "versions": versions,
        "scenario_spec": args.scenarios,
        "seed": seed,
        "time_limit": args.time_limit,
        "security": args.security,
        "host": platform.node(),
        "argv": sys.argv,
        "complete": False,
        "cells": [],
        "new_safety_anomalies": [],
    }
    # SIGTERM (CI cancelling the job) stops like Ctrl-C: the running cell tears down and the
    # cells done so far are written out.
    signal.signal(signal.SIGTERM, _interrupt)
    print(f"matrix: {len(cells)} cells ({', '.join(versions)}) -> {out_dir}", flush=True)
    # Per version, before its first cell: (install error, Java build error).
    prepared: dict[str, tuple[str | None, str | None]] = {}
    java = {c.version for c in cells if c.scenario.client in BUILT_CLIENTS}
    # Each cell is judged in this process (see run_cell): on the Python engines when its
    # evidence is small, as a nightly cell's is, so no JVM starts; the first cell that needs
    # Spark starts one session, which every later cell shares and which ends with the matrix.
    # Never a background warm-up: cancelling one still at work when a cell was judged once
    # left a Spark job waiting forever.
    from checkers import spark as sparkmod

    launches = sparkmod.jvm_launches
    try:
        for i, cell in enumerate(cells, 1):
            if cell.version not in prepared:
                prepared[cell.version] = _prepare(cell.version, cell.version in java)
            error, built = prepared[cell.version]
            if cell.scenario.client not in BUILT_CLIENTS:
                built = None
            if error is not None:
                record = _install_error_record(cell, error)
            elif built is not None:
                record = not_built_record(cell, built)
            else:
                try:
                    record = run_cell(cell, out_dir / "cells" / cell.cell_id, seed)
                except KeyboardInterrupt:
                    matrix["cells"].append(
                        {
                            **base_record(cell),
                            "verdict_source": "interrupted",
                            "message": "interrupted (Ctrl-C or SIGTERM); the run tore down",
                        }
                    )
                    raise
            matrix["cells"].append(record)
            if record["verdict_source"] == "build":
                said = f"NOT BUILT ({record['build_error']})"
            else:
                said = (
                    f"{record['outcome'].upper()} ({record['verdict']}, {record['wall_s']:.0f}s) "
                    f"{record['report'] or record['log'] or ''}"
                )
            print(f"[{i}/{len(cells)}] Kafka {cell.version} {cell.scenario_id}: {said}", flush=True)
            write_json_atomic(out_dir / "matrix.json", matrix)  # progress survives a kill
        matrix["complete"] = True
    finally:
        sparkmod.stop_spark()
        matrix["spark_jvms"] = sparkmod.jvm_launches - launches
        matrix["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        matrix["wall_s"] = round(time.monotonic() - t0, 1)
        matrix["new_safety_anomalies"] = new_safety_anomalies(matrix["cells"], earlier)
        write_outputs(matrix, out_dir, Path(args.junit) if args.junit else None)
        if matrix["complete"]:
            update_seen(store, available, versions)
    return report_and_exit(matrix, out_dir, args.fail_on_new_safety_anomaly)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def report_and_exit(matrix: dict[str, Any], out_dir: Path, fail_on_new: bool) -> int:
    t = matrix["totals"]
    print(
        f"matrix: {t['pass']}/{t['cells']} as expected, {t['fail']} failed, "
        f"{t['error']} without a verdict; {matrix['wall_s']:.0f}s; {out_dir / 'matrix.html'}"
    )
    for n in matrix["new_safety_anomalies"]:
        print(f"NEW safety anomaly: Kafka {n['version']} {n['scenario']}: {', '.join(n['types'])}")
    if fail_on_new:
        return 1 if matrix["new_safety_anomalies"] else 0
    return 0 if t["pass"] == t["cells"] else 1
