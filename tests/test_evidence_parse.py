"""Parsing of DumpLogSegments output into per-record ground truth."""

from __future__ import annotations

import json
from pathlib import Path

from harness.substrate.evidence import parse_dump, write_logdump

SAMPLE = """\
Dumping /data/n1/out-1/00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: 7 \
producerEpoch: 3 partitionLeaderEpoch: 2 isTransactional: true isControl: false \
deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1 size: 89 magic: 2 \
compresscodec: none crc: 1 isvalid: true
| offset: 0 CreateTime: 1 keySize: 1 valueSize: 2 sequence: 0 headerKeys: [src, gen] key: k \
payload: v 0
| offset: 1 CreateTime: 1 keySize: -1 valueSize: 2 sequence: 1 headerKeys: [] payload: v1
baseOffset: 2 lastOffset: 2 count: 1 baseSequence: -1 lastSequence: -1 producerId: 7 \
producerEpoch: 3 partitionLeaderEpoch: 2 isTransactional: true isControl: true \
deleteHorizonMs: OptionalLong.empty position: 89 CreateTime: 2 size: 78 magic: 2 \
compresscodec: none crc: 2 isvalid: true
| offset: 2 CreateTime: 2 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] \
endTxnMarker: ABORT coordinatorEpoch: 5
"""


def test_records_carry_their_batch() -> None:
    rows = parse_dump(SAMPLE, {"/data/n1/out-1/00000000000000000000.log": 1})
    assert [r["offset"] for r in rows] == [0, 1, 2]
    first = rows[0]
    assert (first["topic"], first["partition"], first["node"]) == ("out", 1, 1)
    assert (first["producerId"], first["producerEpoch"]) == (7, 3)
    assert first["isTransactional"] is True and first["isControl"] is False
    assert first["header_keys"] == ["src", "gen"]
    assert first["key"] == "k" and first["payload"] == "v 0"
    assert "key" not in rows[1] and rows[1]["payload"] == "v1"
    marker = rows[2]
    assert marker["isControl"] is True
    assert marker["marker"] == "ABORT" and marker["coordinator_epoch"] == 5


def test_topic_names_with_dashes() -> None:
    text = SAMPLE.replace("/out-1/", "/my-out-topic-12/")
    rows = parse_dump(text, {"/data/n1/my-out-topic-12/00000000000000000000.log": 2})
    assert {(r["topic"], r["partition"]) for r in rows} == {("my-out-topic", 12)}


def test_one_run_of_the_tool_over_several_nodes_names_each_files_node(tmp_path: Path) -> None:
    """write_logdump runs the tool once per kind over every node's files; each record's node
    is its file's, found by the path the tool printed."""
    second = SAMPLE.replace("/data/n1/", "/data/n2/")
    segments = {
        1: ["/data/n1/out-1/00000000000000000000.log"],
        2: ["/data/n2/out-1/00000000000000000000.log"],
    }
    calls: list[tuple[str, list[str]]] = []

    def dump(kind: str, files: list[str]) -> str:
        calls.append((kind, files))
        return SAMPLE + second

    out = write_logdump(tmp_path, 2, segments, dump)
    rows = [json.loads(x) for x in out.read_text().splitlines()[1:]]
    assert calls == [("data", segments[1] + segments[2])]
    assert [(r["node"], r["offset"], r["kind"]) for r in rows] == [
        (n, o, "data") for n in (1, 2) for o in (0, 1, 2)
    ]
