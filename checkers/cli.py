"""Command line for the checkers: ``python -m checkers queue HISTORY`` (and, later, run dirs).

Exit status: 0 valid, 1 invalid, 2 unusable input. Unusable input is always reported as one
line on stderr, never as a traceback, so scripts and CI logs can show it verbatim.

A bare directory argument (``python -m checkers RUN_DIR [--spark-master URL]
[--transaction-version 0|1|2] [--max-examples N] [--engine auto|spark|python]``) is routed to
:func:`check_run_dir`, the entry point for stored runs: it runs the checker suites the run's
``config.json`` names (``checkers.suites``: eos, queue, ...) and the broker-log evidence
checks, prints ``{"valid", "anomalies", "checkers": {...}}``, writes it to
``RUN_DIR/results.json`` and exits 0 valid / 1 invalid / 2 unusable input or unknown verdict.
``--engine`` (default ``auto``: a small run on the Python references, without a JVM) is
:class:`checkers.judge.Judgement`'s; ``--spark-master`` always judges on Spark.
New subcommands are added in :func:`build_parser`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from checkers.findings import finding_lines
from checkers.judge import ENGINES
from checkers.queue.checks import SUB_VIAS, HistoryInputError, check_queue, load_queue_history
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


def check_run_dir(
    path: str | Path,
    *,
    spark_master: str | None = None,
    transaction_version: int | None = None,
    max_examples: int = 8,
    engine: str = "auto",
) -> int:
    """``python -m checkers RUN_DIR``: judge, print the verdict, return the exit status."""
    from checkers.judge import RunDirUnusable, judge_run_dir

    run_dir = Path(path)
    try:
        result = judge_run_dir(
            run_dir,
            spark_master=spark_master,
            transaction_version=transaction_version,
            max_examples=max_examples,
            engine=engine,
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
    for line in finding_lines(result):  # on stderr: stdout is the verdict's JSON
        print(f"checkers: {line}", file=sys.stderr)
    return EXIT_VALID if result["valid"] else EXIT_INVALID


def _run_dir_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m checkers RUN_DIR", add_help=False)
    p.add_argument("--spark-master", metavar="URL", default=None)
    p.add_argument("--transaction-version", type=int, choices=(0, 1, 2), default=None)
    p.add_argument("--max-examples", type=_non_negative, default=8, metavar="N")
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="auto",
        help="auto (default): a small run on the Python references, no JVM; else Spark",
    )
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
                engine=opts.engine,
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
