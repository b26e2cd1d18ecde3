"""pytest plugin: real Kafka clusters as fixtures (registered via the ``pytest11`` entry point).

Each pytest-xdist worker gets its own cluster (own slot: subnet, ports, namespace names), built
once per worker session and torn down at its end, so ``pytest -n auto`` runs clusters side by
side without collisions. Another project can depend on this package and use the fixtures.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.versions import DEFAULT_KAFKA_VERSION


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kafka-harness")
    group.addoption("--kafka-version", default=DEFAULT_KAFKA_VERSION, help="Kafka to test")
    group.addoption("--nodes", type=int, default=3, help="nodes per cluster")
    group.addoption("--store", default="store", help="where runs keep their evidence")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cluster: needs a real Kafka cluster")


@pytest.fixture(scope="session")
def harness_store(request: pytest.FixtureRequest) -> Path:
    # Unique per session: two pytest processes (or xdist workers) must never share the
    # directories their clusters write node configs and evidence into.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    session = f"{time.strftime('%Y%m%dT%H%M%S')}-{worker}-{os.getpid()}"
    path = Path(request.config.getoption("--store")).resolve() / "pytest" / session
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def kafka_cluster(request: pytest.FixtureRequest, harness_store: Path) -> Iterator[object]:
    """A ready cluster shared by the tests of one worker; faults are healed after each use."""
    from harness.cluster import Cluster, ClusterConfig

    cfg = ClusterConfig(
        nodes=request.config.getoption("--nodes"),
        kafka_version=request.config.getoption("--kafka-version"),
        store=harness_store / "cluster",
    )
    with Cluster(cfg) as cluster:
        yield cluster


@pytest.fixture
def healthy_cluster(kafka_cluster):  # type: ignore[no-untyped-def]
    """The worker's cluster, with every fault undone after the test (pass or fail)."""
    yield kafka_cluster
    kafka_cluster.heal_all()
    for node in kafka_cluster.nodes:
        if not node.alive():
            kafka_cluster.start_node(node.node_id)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` without oversubscription: every worker runs a 3-JVM cluster plus clients,
    so at most one worker per core and per 6 GiB of memory."""
    cores = os.cpu_count() or 1
    try:
        mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem_gib = 8.0
    return max(1, min(cores, int(mem_gib // 6)))
