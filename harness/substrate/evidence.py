"""Broker-side ground truth: every partition's log segments, dumped with Kafka's own tool.

Clients can lie (or be wrong) about what they wrote; the log cannot. At teardown each
node's replicas are dumped with ``DumpLogSegments --deep-iteration`` and every record is
written as one JSON object, carrying its batch's producer id, producer epoch,
transactional and control flags, so that the epoch and zombie checkers can judge from what
the brokers actually stored. Internal topics are decoded with the tool's own decoders.

Output: ``<run>/evidence/logdump.jsonl``, in the format of :mod:`history.logdump_format`
(described in ``docs/anomalies.md``, section "Broker log evidence", "Input").
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import Any

from history.logdump_format import BATCH_FIELDS, KINDS, header

_PAIR = re.compile(r"(\w+): (\[[^\]]*\]|\{.*?\}(?= \w+: |$)|\S+)")
#: DumpLogSegments' fields that are booleans and integers (the batch header's among them).
_BOOL_FIELDS = {"isTransactional", "isControl", "isvalid"}
_INT_FIELDS = {
    *BATCH_FIELDS,
    "position",
    "CreateTime",
    "size",
    "offset",
    "keySize",
    "valueSize",
    "sequence",
    "coordinatorEpoch",
} - _BOOL_FIELDS
_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


def _convert(key: str, raw: str) -> Any:
    if key in _INT_FIELDS:
        try:
            return int(raw)
        except ValueError:
            return raw
    if key in _BOOL_FIELDS:
        return raw == "true"
    if key == "headerKeys":
        inner = raw.strip("[]").strip()
        return [h.strip() for h in inner.split(",")] if inner else []
    return raw


def _fields(text: str) -> dict[str, Any]:
    return {k: _convert(k, v) for k, v in _PAIR.findall(text)}


def parse_dump(text: str, node_of: Mapping[str, int]) -> list[dict[str, Any]]:
    """Turn ``DumpLogSegments --deep-iteration`` output into one dict per record; each
    record's node is its file's in ``node_of`` (keyed by normalised path, as given to the
    tool), -1 for a file it does not name."""
    rows: list[dict[str, Any]] = []
    topic, partition, segment, node = "", -1, "", -1
    batch: dict[str, Any] = {}
    for line in text.splitlines():
        if line.startswith("Dumping "):
            printed = line[len("Dumping ") :].strip()
            path = Path(printed)
            node = node_of.get(os.path.normpath(printed), -1)
            segment = path.name
            m = _DIR.match(path.parent.name)
            topic, partition = (m["topic"], int(m["partition"])) if m else (path.parent.name, -1)
        elif line.startswith("baseOffset:"):
            batch = _fields(line)
        elif line.startswith("| offset:"):
            body = line[2:]
            key = payload = None
            if " payload: " in body:
                body, payload = body.split(" payload: ", 1)
            if " key: " in body:
                body, key = body.split(" key: ", 1)
            rec = _fields(body)
            row: dict[str, Any] = {"node": node, "topic": topic, "partition": partition}
            row.update({k: batch.get(k) for k in BATCH_FIELDS})
            row["offset"] = rec.get("offset")
            row["sequence"] = rec.get("sequence")
            row["create_time"] = rec.get("CreateTime")
            row["header_keys"] = rec.get("headerKeys", [])
            if "endTxnMarker" in rec:
                row["marker"] = rec["endTxnMarker"]
                row["coordinator_epoch"] = rec.get("coordinatorEpoch")
            if key is not None:
                row["key"] = key
            if payload is not None:
                row["payload"] = payload
            row["segment"] = segment
            rows.append(row)
    return rows


def classify_segments(paths: Iterable[str]) -> dict[str, list[str]]:
    """Segment files (``<dir>/<topic>-<partition>/<base offset>.log``) by kind of topic:
    user data, offsets, transaction log, share-group state; the cluster metadata log is left
    out. Ordered by
    partition directory, then file."""
    kinds: dict[str, list[str]] = {kind: [] for kind in KINDS}
    for path in sorted(paths, key=lambda p: PurePosixPath(p).parts[-2:]):
        parts = PurePosixPath(path).parts
        if len(parts) < 2 or not parts[-1].endswith(".log"):
            continue
        directory = parts[-2]
        if not _DIR.match(directory) or directory.startswith("__cluster"):
            continue
        if directory.startswith("__consumer_offsets"):
            kinds["offsets"].append(path)
        elif directory.startswith("__transaction_state"):
            kinds["txnlog"].append(path)
        elif directory.startswith("__share_group_state"):
            kinds["share-state"].append(path)
        else:
            kinds["data"].append(path)
    return kinds


_KIND_ARGS = {
    "data": ["--print-data-log"],
    "offsets": ["--offsets-decoder"],
    "txnlog": ["--transaction-log-decoder"],
    "share-state": ["--share-group-state-decoder"],
}


def dump_args(kind: str, files: list[str]) -> list[str]:
    """``DumpLogSegments`` arguments for one kind's files (each kind has its own decoder)."""
    return ["--deep-iteration", *_KIND_ARGS[kind], "--files", ",".join(files)]


def write_logdump(
    out_dir: Path,
    nodes: int,
    segments: Mapping[int, Iterable[str]],
    dump: Callable[[str, list[str]], str | None],
    workers: int = 1,
) -> Path:
    """Write ``out_dir/logdump.jsonl``: the header, then every record of every segment.

    ``segments`` lists each node's segment files. The files of one kind, every node's
    together, go to one invocation of the tool, ``dump(kind, files)``, run wherever the files
    are (a local JVM, a helper container); it returns the tool's output, or None when it
    failed (that kind's records are then missing). One start of a JVM loading Kafka's classes
    per kind instead of one per kind and node: at the end of a short run those starts are most of
    the dump's time, and the verdict waits for it. Each record's node is its file's.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    node_of: dict[str, int] = {}
    by_kind: dict[str, list[str]] = {}
    for node, listing in segments.items():
        for kind, files in classify_segments(listing).items():
            by_kind.setdefault(kind, []).extend(files)
            node_of.update((os.path.normpath(f), node) for f in files)

    def run(kind: str) -> list[dict[str, Any]]:
        text = dump(kind, by_kind[kind])
        rows = parse_dump(text, node_of) if text is not None else []
        for r in rows:
            r["kind"] = kind
        return rows

    out = out_dir / "logdump.jsonl"
    kinds = [k for k, files in by_kind.items() if files]
    with ThreadPoolExecutor(max_workers=workers) as pool, open(out, "w") as fh:
        fh.write(json.dumps(header(nodes)) + "\n")
        for rows in pool.map(run, kinds):
            for row in rows:
                fh.write(json.dumps(row, separators=(",", ":")) + "\n")
    return out


def read_logdump(path: Path) -> list[dict[str, Any]]:
    """Records of a dump (header line skipped)."""
    with open(path) as fh:
        lines = fh.read().splitlines()
    return [json.loads(ln) for ln in lines[1:] if ln.strip()]
