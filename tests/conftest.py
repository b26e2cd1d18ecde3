"""The test suite builds what its cluster tests need before the first of them starts.

On a machine where ``./bootstrap.sh`` has run this costs about two seconds (every part is a
cache hit). On one where it has not, the builds are paid here, once, each shown on a line,
instead of inside whichever test first needs a Kafka version, a client or a Docker image,
where they would stretch that test towards its timeout and hide where the time went. A run
that deselects the cluster tests (the quick tier, ``-m "not cluster ..."``) builds nothing.

The tests run longest first: the real-cluster tests (tens of seconds each), then the Spark
ones, then the logic tests (a second or less each). A run with ``-n`` and no ``--dist`` of its
own uses xdist's work stealing, so the last tests either worker runs are short ones and neither
is left running long tests alone. It is set here rather than in pyproject's ``addopts``, which
would also reach the pytest runs that some tests start with xdist switched off, where
``--dist`` is not an option.
"""

from __future__ import annotations

import time

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # xdist's own pytest_cmdline_main has turned a bare ``-n`` into ``load`` by now, and it
    # picks its scheduler later, from this option, when the session starts.
    asked = any(arg.startswith("--dist") for arg in config.invocation_params.args)
    if getattr(config.option, "dist", None) == "load" and not asked and not config.option.distload:
        config.option.dist = "worksteal"


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


@pytest.hookimpl(trylast=True)  # after the plugin has marked the cluster and Spark tests
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def weight(item: pytest.Item) -> int:
        if item.get_closest_marker("cluster") is not None:
            return 0
        return 1 if item.get_closest_marker("spark") is not None else 2

    items.sort(key=weight)  # stable: each group keeps the modules' own order
