"""Recording throughput of history.Recorder: 1M small ops into a temp file.

The issue budgets recording at <= 5% of a Kafka pipeline's time; dividing 1 s by the printed
figure gives the per-op cost to compare against a produce/consume round trip.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from history import Recorder

N_OPS = 1_000_000


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p0.jsonl"
        with Recorder(path, 0, {"bench": "history_recording"}) as rec:
            start = time.perf_counter()
            for i in range(N_OPS // 2):
                rec.invoke("send", ["send", i, i])
                rec.ok("send", ["send", i, [i, i]])
            elapsed = time.perf_counter() - start
    print(f"{N_OPS / elapsed:,.0f} ops/s")


if __name__ == "__main__":
    main()
