"""Each supported line passes the transactional round trip (3.9.x and the default 4.x)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from harness.substrate.api import ClusterConfig
from harness.substrate.process.cluster import Cluster
from tests.kafka_io import read_committed, transactional_write

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize(
    ("version", "txn_version"), [("3.9.2", None), (None, 0)], ids=["3.9.2", "default-tv0"]
)
def test_round_trip_on_version(
    version: str | None, txn_version: int | None, tmp_path: Path
) -> None:
    cfg = ClusterConfig(kafka_version=version, transaction_version=txn_version, store=tmp_path)
    with Cluster(cfg) as c:
        assert c.install is not None
        if version:
            assert str(c.install.version) == version
        topic = f"rt-{uuid.uuid4().hex[:6]}"
        c.ensure_topic(topic, 3, 3)
        values = {p: [f"{p}:{i}" for i in range(10)] for p in range(3)}
        transactional_write(c.bootstrap, topic, values)
        assert read_committed(c.bootstrap, topic, 3, expect=30) == values
    dump = (tmp_path / "evidence" / "logdump.jsonl").read_text().splitlines()
    rows = [r for r in dump[1:] if f'"topic":"{topic}"' in r]
    # 30 data records + one commit marker per partition, on each of the 3 replicas.
    assert len(rows) == 3 * (30 + 3)
    assert sum('"marker":"COMMIT"' in r for r in rows) == 9
