"""``python -m checkers``: see :mod:`checkers.cli` for subcommands and exit codes."""

from __future__ import annotations

from checkers.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
