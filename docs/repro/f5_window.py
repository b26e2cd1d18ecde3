"""How often a campaign met F5's window, per run (needs this project: run it with its .venv).

    .venv/bin/python docs/repro/f5_window.py STORE/campaign/<timestamp>

For each run of the campaign: its verdict, the known findings its verdict names, and F5's
window counted from its history by the checkers' reference (``pending_waits`` in
``checkers/eos/assignments.py``): assignments read while another instance's transaction over
the partition had not completed, and of those, the ones changed by a rebalance before the
member's first read. A client without F5 starts every one of them at the committed offset.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from checkers.eos.assignments import pending_waits
from checkers.eos.pyref_parse import parse_run


def window(run_dir: Path) -> tuple[int, int]:
    run = parse_run(run_dir)
    invokes = {
        k: (t.index, [(int(p), int(o), v) for p, o, v in t.items if None not in (p, o)])
        for k, t in run.txn_invoke.items()
    }
    dones = {k: (t.index, t.type, list(t.items)) for k, t in run.txn_done.items()}
    return pending_waits(run.rebalances, invokes, dones)


def main(campaign: Path) -> int:
    runs = json.loads((campaign / "campaign.json").read_text())["runs"]
    total = [0, 0, 0]
    for r in runs:
        run_dir = Path(r["run_dir"])
        results = json.loads((run_dir / "results.json").read_text())
        named = [f["id"] for f in results.get("known_findings") or []]
        given, changed = window(run_dir)
        total[0] += not r["valid"]
        total[1] += given
        total[2] += changed
        verdict = "valid" if r["valid"] else f"INVALID {r['anomalies']}"
        print(
            f"seed {r['seed']}: {verdict} {' '.join(named)}; window: {given} given while "
            f"pending, {changed} changed before the first read"
        )
    print(
        f"{total[0]} of {len(runs)} invalid; window: {total[1]} given while pending, "
        f"{total[2]} changed before the first read"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
