"""The campaign's account of late requests: answers by name, and a held batch's fate in the log."""

from __future__ import annotations

import json
from pathlib import Path

from harness.nightly.held import error_name, late_request_summary


def _row(offset: int, seq: int, t: int, marker: str | None = None, pid: int = 7) -> dict:
    row = {"node": 1, "topic": "out", "partition": 0, "offset": offset, "producerId": pid}
    row.update({"producerEpoch": 0, "sequence": seq, "create_time": t})
    return {**row, "marker": marker} if marker else row


def _held(seq: int, released: int, code: int) -> dict:
    return {
        "topic": "out",
        "partition": 0,
        "producer_id": 7,
        "producer_epoch": 0,
        "base_sequence": seq,
        "released_at_ms": released,
        "error_code": code,
    }


def test_a_campaign_run_says_what_the_broker_made_of_each_late_request(tmp_path: Path) -> None:
    stop = {
        "process": "nemesis",
        "type": "ok",
        "f": "stop",
        "value": {
            "kind": "late-produce",
            # The third names its topic by id, as Produce v13 does.
            "held": [
                _held(0, 1500, 0),
                _held(5, 3500, 19),
                {**_held(6, 3500, 45), "topic": "ab" * 16},
            ],
            "late_delivered": 3,
        },
    }
    (tmp_path / "history.jsonl").write_text(json.dumps({"f": "poll"}) + "\n" + json.dumps(stop))
    dump = [
        _row(0, 0, 1000),  # the client's retry of sequence 0 ...
        _row(1, -1, 1200, "ABORT"),
        _row(2, 0, 1500),  # ... and the held original, appended after the abort
        _row(3, 5, 3000),  # sequence 5: once only; its COMMIT came before the late copy
        _row(4, -1, 3100, "COMMIT"),
        _row(5, 5, 3100, pid=8),  # another producer's batch with the same sequence
        _row(6, 6, 3400),  # the producer's next transaction, before the late copy came
    ]
    (tmp_path / "evidence").mkdir()
    (tmp_path / "evidence" / "logdump.jsonl").write_text("\n".join(map(json.dumps, dump)))
    summary = late_request_summary(tmp_path)
    assert summary["held"] == summary["delivered"] == 3
    assert summary["answers"] == {
        "NONE": 1,
        "NOT_ENOUGH_REPLICAS": 1,
        "OUT_OF_ORDER_SEQUENCE_NUMBER": 1,
    }
    assert summary["produce_fates"] == {
        "appended-late": 1,
        "not-appended": 2,
        "after-abort-marker": 1,
        "after-commit-marker": 1,
        "inside-next-transaction": 1,
    }
    assert error_name(90) == "PRODUCER_FENCED" and error_name(None) == "no answer"
    assert late_request_summary(tmp_path / "missing") == {}
