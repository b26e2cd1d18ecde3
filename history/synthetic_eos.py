"""A synthetic, valid ``eos`` history of a chosen number of ops, streamed to disk.

Why synthetic: the scale point (issue #5) needs histories of 1M and 10M ops, far beyond what a
real Kafka run on the test machine produces in reasonable time. The generator simulates the
consume-transform-produce loop of ``docs/history-format.md`` ("Workload eos") sequentially,
so the result is correct by construction and every eos check must pass:

* a seeder sends batches of 1-6 values (``send`` invoke/ok with offsets), now and then a
  poison batch in a transaction it aborts (``send-aborted`` invoke/fail; the aborted records
  and the abort marker take input offsets) and now and then an ``info`` send whose values were
  never written (null offsets);
* three processor instances own the input partitions; each ``txn`` takes 1-3 inputs of one
  owned partition from the group's committed position, and completes ``ok`` (outputs with
  offsets, new input offsets) or, ~3%, ``fail`` with a deliberate abort followed by
  ``rewind``; outputs carry the documented headers; every committed or aborted transaction
  takes one marker offset in each output partition it wrote;
* rebalances (revoke/assign with a new generation), instance replacement (``exit``, supervisor
  ``processor-exit``/``spawn``, a new instance id and transactional id), and nemesis
  ``pause``/``resume`` ops;
* the final process's ``drain``, one ``read`` per output partition at each isolation level
  (records in offset order; read_uncommitted also shows aborted outputs), ``group-offsets``,
  ``watermarks`` and ``find-hanging``.

Ops are written as they are made; only the per-partition input logs (ints) and the drained
records (in per-partition spool files) are kept, so generating 10M ops needs little memory.
"""

from __future__ import annotations

import json
import random
import tempfile
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

IN, OUT, GROUP = "in", "out", "g"
T0 = 1_000_000_000


@dataclass
class _Out:
    """One output partition: next offset and spool files of its drained records."""

    committed: IO[str]
    uncommitted: IO[str]
    next: int = 0
    n_committed: int = 0
    n_uncommitted: int = 0


@dataclass
class _Gen:
    fh: IO[str]
    rnd: random.Random
    partitions: int
    spool: Path
    index: int = 0
    pindex: dict[Any, int] = field(default_factory=dict)
    log: list[array] = field(default_factory=list)  # input log: value id, -1 poison/marker
    committed: list[int] = field(default_factory=list)
    next_value: int = 0
    next_poison: int = 0
    gen: int = 1
    instances: list[int] = field(default_factory=list)
    next_instance: int = 0
    owner: dict[int, int] = field(default_factory=dict)
    seq: dict[int, int] = field(default_factory=dict)
    outs: list[_Out] = field(default_factory=list)

    # -- writing ops ------------------------------------------------------------------------

    def op(self, process: Any, type_: str, f: str, value: str, error: str | None = None) -> None:
        """Write one op; ``value``/``error`` are already JSON text (fast, no dumps per op)."""
        i = self.index
        pi = self.pindex.get(process, 0)
        self.pindex[process] = pi + 1
        t = T0 + i * 1000
        us = i % 1_000_000
        s = (i // 1_000_000) % 60
        proc = process if isinstance(process, int) else f'"{process}"'
        err = "" if error is None else f',"error":{error}'
        self.fh.write(
            f'{{"index":{i},"pindex":{pi},"time":{t},"wall":"2026-01-01T00:00:{s:02d}.{us:06d}Z",'
            f'"process":{proc},"type":"{type_}","f":"{f}","value":{value}{err}}}\n'
        )
        self.index += 1

    # -- actors -----------------------------------------------------------------------------

    def seed(self) -> None:
        n = self.rnd.randint(1, 6)
        vals = []
        for _ in range(n):
            vals.append((self.next_value, self.rnd.randrange(self.partitions)))
            self.next_value += 1
        inv = ",".join(f'["v{v:06d}",{p}]' for v, p in vals)
        self.op("seeder", "invoke", "send", f'{{"values":[{inv}]}}')
        if self.rnd.random() < 0.002:  # never acknowledged, never written
            done = ",".join(f'["v{v:06d}",{p},null]' for v, p in vals)
            err = f'{{"code":"UNACKNOWLEDGED","message":"timed out","count":{n}}}'
            self.op("seeder", "info", "send", f'{{"values":[{done}]}}', err)
            return
        parts = []
        for v, p in vals:
            parts.append(f'["v{v:06d}",{p},{len(self.log[p])}]')
            self.log[p].append(v)
        self.op("seeder", "ok", "send", f'{{"values":[{",".join(parts)}]}}')

    def poison(self) -> None:
        n = self.rnd.randint(1, 3)
        vals = [(self.next_poison + k, self.rnd.randrange(self.partitions)) for k in range(n)]
        self.next_poison += n
        inv = ",".join(f'["x{v:06d}",{p}]' for v, p in vals)
        self.op("seeder", "invoke", "send-aborted", f'{{"values":[{inv}]}}')
        done = []
        for v, p in vals:
            done.append(f'["x{v:06d}",{p},{len(self.log[p])}]')
            self.log[p].append(-1)
        for p in sorted({p for _v, p in vals}):
            self.log[p].append(-1)  # the abort marker
        err = '{"code":"DELIBERATE_ABORT","message":"poison"}'
        self.op("seeder", "fail", "send-aborted", f'{{"values":[{",".join(done)}]}}', err)

    def spawn(self, replaces: int | None) -> int:
        inst = self.next_instance
        self.next_instance += 1
        tid = f"eos-p{inst}"
        rep = "null" if replaces is None else str(replaces)
        sp = f'{{"slot":{inst % 3},"instance":{inst},"transactional_id":"{tid}","replaces":{rep}'
        self.op("supervisor", "invoke", "spawn", sp + "}")
        self.op("supervisor", "ok", "spawn", sp + f',"pid":{10000 + inst}}}')
        st = (
            f'{{"instance":{inst},"slot":{inst % 3},"pid":{10000 + inst},"variant":"eos",'
            f'"transactional_id":"{tid}","group_id":"{GROUP}","input_topic":"{IN}",'
            f'"output_topic":"{OUT}"}}'
        )
        self.op(inst, "invoke", "start", st)
        self.op(inst, "ok", "start", st)
        self.seq[inst] = 0
        return inst

    def exit(self, inst: int) -> None:
        self.op(inst, "invoke", "exit", '{"reason":"sigterm"}')
        self.op(
            inst,
            "ok",
            "exit",
            f'{{"reason":"sigterm","code":0,"txns":{self.seq[inst]},"committed":0,"failed":0}}',
        )
        pid = 10000 + inst
        pe = f'{{"slot":{inst % 3},"instance":{inst},"pid":{pid}'
        self.op("supervisor", "invoke", "processor-exit", pe + "}")
        self.op("supervisor", "ok", "processor-exit", pe + ',"returncode":0}')

    def rebalance(self) -> None:
        old = dict(self.owner)
        self.gen += 1
        for i in self.instances:
            mine = [p for p, o in old.items() if o == i]
            if mine:
                ps = ",".join(f'["{IN}",{p}]' for p in mine)
                self.op(i, "invoke", "rebalance", f'{{"event":"revoke","partitions":[{ps}]}}')
                self.op(
                    i,
                    "ok",
                    "rebalance",
                    f'{{"event":"revoke","partitions":[{ps}],"generation":{self.gen - 1},'
                    f'"member_id":"m{i}"}}',
                )
        order = list(self.instances)
        self.rnd.shuffle(order)
        self.owner = {p: order[p % len(order)] for p in range(self.partitions)}
        for i in self.instances:
            ps = ",".join(f'["{IN}",{p}]' for p, o in self.owner.items() if o == i)
            self.op(i, "invoke", "rebalance", f'{{"event":"assign","partitions":[{ps}]}}')
            self.op(
                i,
                "ok",
                "rebalance",
                f'{{"event":"assign","partitions":[{ps}],"generation":{self.gen},'
                f'"member_id":"m{i}"}}',
            )

    def replace(self) -> None:
        """One instance leaves and a new one takes its slot; the group rebalances."""
        k = self.rnd.randrange(len(self.instances))
        gone = self.instances[k]
        self.exit(gone)
        self.instances[k] = self.spawn(gone)
        self.owner = {p: o for p, o in self.owner.items() if o != gone}
        self.rebalance()

    def nemesis(self) -> None:
        self.op("nemesis", "invoke", "pause", '["broker-2"]')
        self.op("nemesis", "ok", "pause", '["broker-2"]')
        self.op("nemesis", "invoke", "resume", '["broker-2"]')
        self.op("nemesis", "ok", "resume", '["broker-2"]')

    def backlog(self, p: int) -> int:
        return len(self.log[p]) - self.committed[p]

    def txn(self, p: int, abort: bool) -> None:
        """One transaction of the owner of input partition ``p``: 1-3 of its next inputs."""
        inst = self.owner[p]
        log = self.log[p]
        pos, end = self.committed[p], len(log)
        want = self.rnd.randint(1, 3)
        inputs: list[tuple[int, int]] = []
        while pos < end and len(inputs) < want:
            if log[pos] >= 0:
                inputs.append((pos, log[pos]))
            pos += 1
        while pos < end and log[pos] < 0:  # skip aborted records and markers after the batch
            pos += 1
        self.seq[inst] += 1
        s = self.seq[inst]
        tid = f"eos-p{inst}"
        ins = ",".join(f'[{p},{o},"v{v:06d}"]' for o, v in inputs)
        self.op(
            inst,
            "invoke",
            "txn",
            f'{{"txn":{s},"transactional_id":"{tid}","generation":{self.gen},'
            f'"member_id":"m{inst}","inputs":[{ins}]}}',
        )
        q = p % len(self.outs)
        out = self.outs[q]
        outputs = []
        for o, v in inputs:
            off = out.next
            out.next += 1
            hdr = (
                f'{{"src-topic":"{IN}","src-partition":"{p}","src-offset":"{o}",'
                f'"instance":"{inst}","transactional-id":"{tid}","generation":"{self.gen}",'
                f'"member-id":"m{inst}","txn-seq":"{s}"}}'
            )
            rec = f'[{off},"v{v:06d}","out-v{v:06d}",{hdr}]'
            out.uncommitted.write(("," if out.n_uncommitted else "") + rec)
            out.n_uncommitted += 1
            if not abort:
                out.committed.write(("," if out.n_committed else "") + rec)
                out.n_committed += 1
            outputs.append(f'[{q},{off},"out-v{v:06d}",{p},{o}]')
        out.next += 1  # the commit or abort marker
        body = f'{{"txn":{s},"outputs":[{",".join(outputs)}],"offsets":[[{p},{pos}]]}}'
        if not abort:
            self.committed[p] = pos
            self.op(inst, "ok", "txn", body)
            return
        err = (
            '{"stage":"deliberate-abort","code":"DELIBERATE_ABORT","message":"abort",'
            '"fatal":false,"abortable":true,"retriable":false}'
        )
        self.op(inst, "fail", "txn", body, err)
        self.op(inst, "invoke", "rewind", f'{{"partitions":[["{IN}",{p}]]}}')
        self.op(
            inst,
            "ok",
            "rewind",
            f'{{"partitions":[["{IN}",{p}]],"offsets":[[{p},{self.committed[p]}]]}}',
        )

    # -- the end ----------------------------------------------------------------------------

    def finish(self) -> None:
        """Supervisor stop, then what the final process observes."""
        ins = ",".join(str(i) for i in self.instances)
        self.op("supervisor", "invoke", "stop", f'{{"instances":[{ins}]}}')
        rcs = ",".join(f"[{i},0]" for i in self.instances)
        self.op("supervisor", "ok", "stop", f'{{"returncodes":[{rcs}]}}')
        targets = ",".join(f"[{p},{len(self.log[p])}]" for p in range(self.partitions))
        offs = ",".join(f"[{p},{self.committed[p]}]" for p in range(self.partitions))
        dr = f'{{"group":"{GROUP}","topic":"{IN}","targets":[{targets}]'
        self.op("final", "invoke", "drain", dr + "}")
        self.op("final", "ok", "drain", dr + f',"offsets":[{offs}],"seconds":1.5}}')
        for q, out in enumerate(self.outs):
            for iso, fh in (
                ("read_committed", out.committed),
                ("read_uncommitted", out.uncommitted),
            ):
                v = f'{{"topic":"{OUT}","partition":{q},"isolation":"{iso}"'
                self.op("final", "invoke", "read", v + "}")
                fh.flush()
                fh.seek(0)
                self._read_ok(v, fh)
        self.op("final", "invoke", "group-offsets", f'{{"group":"{GROUP}"}}')
        go = ",".join(f'["{IN}",{p},{self.committed[p]}]' for p in range(self.partitions))
        self.op("final", "ok", "group-offsets", f'{{"group":"{GROUP}","offsets":[{go}]}}')
        for topic, ends in (
            (IN, [len(x) for x in self.log]),
            (OUT, [o.next for o in self.outs]),
        ):
            ps = ",".join(
                f'{{"partition":{p},"low":0,"lso":{e},"hwm":{e}}}' for p, e in enumerate(ends)
            )
            self.op("final", "invoke", "watermarks", f'{{"topic":"{topic}"}}')
            self.op("final", "ok", "watermarks", f'{{"topic":"{topic}","partitions":[{ps}]}}')
        self.op("final", "invoke", "find-hanging", '{"brokers":[1,2,3]}')
        res = ",".join(f'{{"broker":{b},"rows":[]}}' for b in (1, 2, 3))
        self.op("final", "ok", "find-hanging", f'{{"brokers":[1,2,3],"results":[{res}]}}')

    def _read_ok(self, v: str, spool: IO[str]) -> None:
        """A read ``ok`` whose records come from a spool file, copied without loading it all."""
        i = self.index
        pi = self.pindex["final"]
        self.pindex["final"] = pi + 1
        us, s = i % 1_000_000, (i // 1_000_000) % 60
        self.fh.write(
            f'{{"index":{i},"pindex":{pi},"time":{T0 + i * 1000},'
            f'"wall":"2026-01-01T00:00:{s:02d}.{us:06d}Z","process":"final","type":"ok",'
            f'"f":"read","value":{v},"records":['
        )
        while chunk := spool.read(1 << 20):
            self.fh.write(chunk)
        self.fh.write("]}}\n")
        self.index += 1


def generate(path: Path, ops: int, *, partitions: int = 12, seed: int = 1) -> dict[str, int]:
    """Write a merged eos history of about ``ops`` ops to ``path``; returns its statistics."""
    rnd = random.Random(seed)
    header = {
        "history_format": 1,
        "kind": "merged",
        "meta": {
            "workload": "eos",
            "synthetic": True,
            "eos": {"variant": "eos", "input_topic": IN, "output_topic": OUT, "group_id": GROUP},
        },
        "merged_wall": "2026-01-01T00:01:00.000000Z",
        "sources": [],
    }
    with (
        tempfile.TemporaryDirectory(prefix="kh-synth-", dir=path.parent) as tmp,
        open(path, "w", buffering=1 << 20) as fh,
    ):
        fh.write(json.dumps(header, separators=(",", ":")) + "\n")
        spool = Path(tmp)
        g = _Gen(fh=fh, rnd=rnd, partitions=partitions, spool=spool)
        g.log = [array("q") for _ in range(partitions)]
        g.committed = [0] * partitions
        for q in range(partitions):
            c = open(spool / f"c{q}", "w+", buffering=1 << 20)  # noqa: SIM115 - closed below
            u = open(spool / f"u{q}", "w+", buffering=1 << 20)  # noqa: SIM115
            g.outs.append(_Out(c, u))
        try:
            _simulate(g, ops)
        finally:
            for o in g.outs:
                o.committed.close()
                o.uncommitted.close()
        stats = {
            "ops": g.index,
            "values": g.next_value,
            "drained": sum(o.n_committed for o in g.outs),
            "instances": g.next_instance,
            "generations": g.gen,
        }
    return stats


def _simulate(g: _Gen, ops: int) -> None:
    rnd = g.rnd
    g.instances = [g.spawn(None) for _ in range(3)]
    g.rebalance()
    final_ops = 4 * len(g.outs) + 16
    while True:
        backlog = [p for p in range(g.partitions) if g.backlog(p) > 0]
        # Room left: each backlog input costs up to 2 ops to process at the end.
        pending = sum(g.backlog(p) for p in backlog)
        if g.index + final_ops + 2 * pending + 16 >= ops:
            break
        r = rnd.random()
        if r < 0.35 or not backlog:
            if rnd.random() < 0.01:
                g.poison()
            else:
                g.seed()
        elif r < 0.35004:
            g.replace()
        elif r < 0.3502:
            g.rebalance()
        elif r < 0.35023:
            g.nemesis()
        else:
            g.txn(rnd.choice(backlog), abort=rnd.random() < 0.03)
    for p in range(g.partitions):
        while g.backlog(p) > 0 and any(x >= 0 for x in g.log[p][g.committed[p] :]):
            g.txn(p, abort=False)
    g.finish()
