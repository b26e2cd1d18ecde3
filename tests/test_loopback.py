"""Without namespaces the cluster still works on loopback, and says what it cannot do."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from common.errors import HarnessError
from harness.substrate.api import ClusterConfig
from harness.substrate.process.cluster import Cluster
from tests.kafka_io import read_committed, transactional_write

pytestmark = pytest.mark.cluster


def test_loopback_cluster_round_trip_and_refuses_partitions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Cluster(ClusterConfig(network="loopback", store=tmp_path)) as c:
        assert not c.uses_netns
        assert all(n.net.ip.startswith("127.") for n in c.nodes)
        topic = f"lo-{uuid.uuid4().hex[:6]}"
        c.ensure_topic(topic, 2, 3)
        transactional_write(c.bootstrap, topic, {0: ["a"], 1: ["b"]})
        assert read_committed(c.bootstrap, topic, 2, expect=2) == {0: ["a"], 1: ["b"]}
        with pytest.raises(HarnessError, match="namespaces"):
            c.isolate(1)
