"""The test suite builds what its cluster tests need before the first of them starts.

On a machine where ``./bootstrap.sh`` has run this costs about two seconds (every part is a
cache hit). On one where it has not, the builds are paid here, once, each shown on a line,
instead of inside whichever test first needs a Kafka version, a client or a Docker image,
where they would stretch that test towards its timeout and hide where the time went. A run
that deselects the cluster tests (the quick tier, ``-m "not cluster ..."``) builds nothing.
"""

from __future__ import annotations

import time

import pytest


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if hasattr(config, "workerinput"):  # an xdist worker: the controller has done it
        return
    if "not cluster" in (config.option.markexpr or ""):
        return
    from harness import prepare

    reporter = config.pluginmanager.get_plugin("terminalreporter")

    def say(line: str) -> None:
        if reporter is not None:
            reporter.write_line(line)

    t0 = time.monotonic()
    prepare.main_job()
    warnings = prepare.the_rest(say)
    took = time.monotonic() - t0
    if took >= 5 or warnings:
        say(f"built what the cluster tests need in {took:.0f} s ({len(warnings)} not built)")
