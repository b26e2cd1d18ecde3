"""Command line for the checkers: ``python -m checkers queue HISTORY`` (and, later, run dirs).

Exit status: 0 valid, 1 invalid, 2 unusable input. Unusable input is always reported as one
line on stderr, never as a traceback, so scripts and CI logs can show it verbatim.

A bare directory argument (``python -m checkers RUN_DIR [--spark-master URL]
[--transaction-version 0|1|2] [--max-examples N]``) is routed to :func:`check_run_dir`, the
entry point for stored runs: it runs the checker suites the run's ``config.json`` names
(``checkers.suites``: eos, queue, ...) and the broker-log evidence checks, prints
``{"valid", "anomalies", "checkers": {...}}``, writes it to ``RUN_DIR/results.json`` and exits
0 valid / 1 invalid / 2 unusable input or unknown verdict.
New subcommands are added in :func:`build_parser`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from checkers.queue import SUB_VIAS, HistoryInputError, check_queue, load_queue_history
from common.errors import OneLineParser

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNUSABLE = 2

_SUBCOMMANDS = ("queue",)


def _non_negative(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return n


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree; add a subparser here for each new checker."""
    parser = OneLineParser(
        prog="python -m checkers",
        description="Check stored histories. A bare RUN_DIR argument checks a stored run.",
    )
    sub = parser.add_subparsers(
        dest="command", metavar="{queue} | RUN_DIR", parser_class=OneLineParser
    )
    q = sub.add_parser("queue", help="check a Kafka queue-workload history (JSON or JSONL)")
    q.add_argument("history", help="history file: JSON array, JSONL, or history format v1")
    q.add_argument(
        "--ww-deps",
        action="store_true",
        help="infer write-write dependencies from log order (G1c then allowed)",
    )
    q.add_argument(
        "--sub-via",
        choices=SUB_VIAS,
        default="assign",
        help="how consumers got partitions (subscribe allows poll skips)",
    )
    q.add_argument(
        "--max-examples",
        type=_non_negative,
        default=8,
        metavar="N",
        help="examples kept per anomaly type (default 8)",
    )
    q.set_defaults(func=_run_queue)
    return parser


def _run_queue(args: argparse.Namespace) -> int:
    try:
        ops = load_queue_history(args.history)
        result = check_queue(
            ops, ww_deps=args.ww_deps, sub_via=args.sub_via, max_examples=args.max_examples
        )
    except HistoryInputError as e:
        print(f"checkers queue: {e}", file=sys.stderr)
        return EXIT_UNUSABLE
    json.dump(result, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
    return EXIT_VALID if result["valid"] else EXIT_INVALID


def _merge_verdicts(parts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Combine the partial verdicts of the run-dir checks into the printed result.

    Two shapes of part exist: broker-log evidence names its anomaly types per checker
    (``anomalies`` and ``bad_anomaly_types`` inside each checker), the eos checks name them
    at part level (``anomalies`` = counts of the checks that failed, one checker per type,
    ``liveness`` beside). A part whose own ``valid`` is false always makes the run invalid,
    whatever shape it has, so no part can be lost in the merge.
    """
    checkers: dict[str, Any] = {}
    anomalies: dict[str, int] = {}
    bad: set[str] = set()
    errors: dict[str, str] = {}
    stats: dict[str, Any] = {}
    liveness: dict[str, Any] = {}
    notes: list[str] = []
    for name, part in parts.items():
        if part.get("valid") == "unknown" or "error" in part:
            errors[name] = str(part.get("error", "unknown verdict"))
        part_bad: set[str] = set(part.get("bad_anomaly_types", []))
        for cname, res in part.get("checkers", {}).items():
            checkers[cname] = res
            anomalies.update(res.get("anomalies", {}))
            part_bad.update(res.get("bad_anomaly_types", []))
            if res.get("valid") is False and "anomalies" not in res:
                part_bad.add(cname)  # an eos check: the checker is the anomaly type
            if res.get("valid") == "unknown":
                errors[cname] = str(res.get("error", "unknown verdict"))
        anomalies.update(part.get("anomalies", {}))
        if part.get("valid") is False and not part_bad:
            part_bad = {t for t, n in part.get("anomalies", {}).items() if n} or {name}
        bad |= part_bad
        if "stats" in part:
            stats[name] = part["stats"]
        if "liveness" in part:
            liveness[name] = part["liveness"]
        notes += part.get("input_notes", [])
    valid: bool | str = False if bad else ("unknown" if errors else True)
    out: dict[str, Any] = {
        "valid": valid,
        "anomalies": dict(sorted(anomalies.items())),
        "bad_anomaly_types": sorted(bad),
        "checkers": checkers,
    }
    if liveness:
        out["liveness"] = liveness
    if errors:
        out["errors"] = errors
    if stats:
        out["stats"] = stats
    if notes:
        out["input_notes"] = notes
    return out


def _write_results(run_dir: Path, result: dict[str, Any]) -> None:
    """``results.json`` beside the run, replaced atomically; a read-only run is not an error."""
    target = run_dir / "results.json"
    tmp = run_dir / f".results.json.{os.getpid()}.tmp"
    with contextlib.suppress(OSError):
        tmp.write_text(json.dumps(result, indent=2, default=str) + "\n")
        tmp.replace(target)


class RunDirUnusable(Exception):
    """The run directory cannot be judged at all (nothing to check, or unusable input)."""


def judge_run_dir(
    path: str | Path,
    *,
    spark_master: str | None = None,
    transaction_version: int | None = None,
    max_examples: int = 8,
) -> dict[str, Any]:
    """Run every applicable check on a stored run directory and write ``results.json``.

    Returns the merged verdict (``valid`` is True, False or "unknown"). A Spark session that
    is already running in this process (a test session's) is reused and left running; one
    started here is stopped before returning. Raises :class:`RunDirUnusable` when there is
    nothing to check or the input is unusable (``results.json`` then says so).
    """
    from checkers.suites import RunContext, checks_for, read_config
    from history.logdump import CheckerInputError

    run_dir = Path(path)
    config = read_config(run_dir)
    try:
        checks = checks_for(run_dir, config)
    except CheckerInputError as e:
        raise RunDirUnusable(str(e)) from e
    if not checks:
        raise RunDirUnusable(
            f"nothing to check in {run_dir}: no history.jsonl and no evidence/logdump.jsonl"
        )
    ctx = RunContext(run_dir, spark_master, transaction_version, max_examples, config)
    parts: dict[str, dict[str, Any]] = {}
    started_spark = False
    if any(c.spark for c in checks) and _spark_running() is False:
        # One session for every check of this run, stopped (JVM included) at the end.
        from checkers.log_rules import unknown_result
        from checkers.spark import spark_error, start_spark

        try:
            start_spark(spark_master)
            started_spark = True
        except Exception as e:
            err = str(spark_error(e))
            parts = {c.name: unknown_result(err) for c in checks if c.spark}
            checks = [c for c in checks if not c.spark]
    try:
        for check in checks:
            parts[check.name] = check.run(ctx)
    except CheckerInputError as e:
        _write_results(run_dir, {"valid": "unknown", "error": str(e), "checkers": {}})
        raise RunDirUnusable(str(e)) from e
    finally:
        if started_spark:
            _stop_spark()
    result = _merge_verdicts(parts)
    _write_results(run_dir, result)
    return result


def check_run_dir(
    path: str | Path,
    *,
    spark_master: str | None = None,
    transaction_version: int | None = None,
    max_examples: int = 8,
) -> int:
    """``python -m checkers RUN_DIR``: judge, print the verdict, return the exit status."""
    run_dir = Path(path)
    try:
        result = judge_run_dir(
            run_dir,
            spark_master=spark_master,
            transaction_version=transaction_version,
            max_examples=max_examples,
        )
    except RunDirUnusable as e:
        print(f"checkers: {e}", file=sys.stderr)
        return EXIT_UNUSABLE
    json.dump(result, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
    if result["valid"] == "unknown":
        first = next(iter(result.get("errors", {}).values()), "unknown verdict")
        print(f"checkers: cannot judge {run_dir}: {first}", file=sys.stderr)
        return EXIT_UNUSABLE
    return EXIT_VALID if result["valid"] else EXIT_INVALID


def _spark_running() -> bool | None:
    """Whether a Spark session is running in this process (None: pyspark not installed)."""
    try:
        from checkers.spark import active_session
    except ImportError:
        return None
    return active_session() is not None


def _stop_spark() -> None:
    with contextlib.suppress(ImportError):
        from checkers.spark import stop_spark

        stop_spark()


def _run_dir_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m checkers RUN_DIR", add_help=False)
    p.add_argument("--spark-master", metavar="URL", default=None)
    p.add_argument("--transaction-version", type=int, choices=(0, 1, 2), default=None)
    p.add_argument("--max-examples", type=_non_negative, default=8, metavar="N")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, dispatch, and return the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    first = args_list[0] if args_list else ""
    if first and not first.startswith("-") and first not in _SUBCOMMANDS and Path(first).is_dir():
        opts = _run_dir_parser().parse_args(args_list[1:])
        try:
            return check_run_dir(
                first,
                spark_master=opts.spark_master,
                transaction_version=opts.transaction_version,
                max_examples=opts.max_examples,
            )
        except BrokenPipeError:
            return EXIT_VALID
    args = parser.parse_args(args_list)
    if getattr(args, "func", None) is None:
        parser.error("expected a subcommand (queue) or a RUN_DIR")
    try:
        return int(args.func(args))
    except BrokenPipeError:
        return EXIT_VALID
