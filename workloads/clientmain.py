"""The entry point of a Python client process that is given one ``--config JSON``.

The share members and the offsets committers start the same way: the JSON must hold the
keys the client requires (a newer harness may add others), the client is built from it,
SIGTERM asks its loop to stop, and whatever happens it is closed so its history file ends
cleanly. A bad configuration and a client that cannot start each exit with a status of their
own and one line on stderr, which the supervisor keeps in the client's log.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol

#: A client's exit statuses before its loop runs.
EXIT_BAD_CONFIG: Final = 2
EXIT_INIT: Final = 3


class Client(Protocol):
    #: Why the loop should stop (None: keep going); SIGTERM sets it to ``"sigterm"``.
    stopping: str | None

    def run(self) -> int: ...
    def close(self) -> None: ...


def run_client(
    argv: list[str] | None,
    prog: str,
    what: str,
    required: Sequence[str],
    make: Callable[[dict[str, Any]], Client],
) -> int:
    """Parse ``--config``, build the client with ``make``, run it until it returns or
    SIGTERM, close it; the exit status."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    try:
        cfg = json.loads(args.config)
        missing = [k for k in required if k not in cfg]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
    except ValueError as exc:
        print(f"{what}: bad --config: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    try:
        client = make(cfg)
    except Exception as exc:
        print(f"{what}: could not start: {exc}", file=sys.stderr)
        return EXIT_INIT

    def stop(_signum: int, _frame: Any) -> None:
        client.stopping = "sigterm"

    signal.signal(signal.SIGTERM, stop)
    try:
        return client.run()
    finally:
        client.close()
