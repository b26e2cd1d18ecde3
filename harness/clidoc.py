"""The command-line reference (``docs/cli.md``), written from the argument parsers themselves.

Why generated: a hand-written reference drifts the day a flag is added. ``python -m
harness.clidoc`` prints it; ``tests/test_docs.py`` fails when the file differs from what the
parsers say, so a new flag lands with its documentation or not at all.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager

#: The width help is wrapped to, whatever the terminal: the page must not depend on it.
WIDTH = 96

HEADER = """# Command-line reference

Every command and option, as `--help` prints them. This page is written by
`python -m harness.clidoc > docs/cli.md`; a test fails when it differs from the parsers.
"""


@contextmanager
def _fixed_width() -> Iterator[None]:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(WIDTH)
    try:
        yield
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices.items())
    return []


def _section(title: str, parser: argparse.ArgumentParser) -> str:
    return f"## `{title}`\n\n```text\n{parser.format_help().rstrip()}\n```\n"


def render() -> str:
    """The whole page: ``python -m harness`` and each of its commands, then ``python -m
    checkers`` and its commands."""
    from checkers.cli import _run_dir_parser
    from checkers.cli import build_parser as checkers_parser
    from harness.cli import build_parser as harness_parser

    parts = [HEADER]
    with _fixed_width():
        harness = harness_parser()
        parts.append(_section("python -m harness", harness))
        for name, sub in sorted(_subcommands(harness)):
            parts.append(_section(f"python -m harness {name}", sub))
        checkers = checkers_parser()
        parts.append(_section("python -m checkers", checkers))
        parts.append(_section("python -m checkers RUN_DIR", _run_dir_parser()))
        for name, sub in sorted(_subcommands(checkers)):
            parts.append(_section(f"python -m checkers {name}", sub))
    return "\n".join(parts)


if __name__ == "__main__":
    print(render(), end="")
