"""The project's Python eos processor with two breaches of the client contract planted: no
exit op (the supervisor's status then has nothing to match), and txn invokes without a
member id. For tests/test_contract_check.py, through the manifest beside it."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from history.recorder import Recorder
from workloads.eos import processor as eos_processor

_record = Recorder.record


def _broken_record(self: Recorder, type_: str, f: str, value: object, *args, **kw):  # type: ignore[no-untyped-def]
    if f == "exit":
        return {}
    if f == "txn" and type_ == "invoke" and isinstance(value, dict):
        value = {k: v for k, v in value.items() if k != "member_id"}
    return _record(self, type_, f, value, *args, **kw)


Recorder.record = _broken_record  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(eos_processor.main(sys.argv[1:]))
