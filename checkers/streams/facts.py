"""The facts the streams checks judge, taken from a run's merged history in one pass.

What the application consumed is the input topic as the final read_committed read returned
it (seeds whose acknowledgement was lost included, aborted seeds excluded); what it committed
is the read_committed reads of the output, aggregate and changelog topics; how far it got is
the group's committed offsets. Both engines judge these same facts, so a difference between
them is a difference in judging, never in reading.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from history import iter_history
from history.logdump import CheckerInputError
from history.schema import HistoryError
from history.streams_records import H_SRC_OFFSET, H_SRC_PARTITION, H_SRC_VALUE

#: (partition, offset, value) of the input topic.
Input = tuple[int, int, str]
#: (partition, offset, key, value, src partition, src offset, src value) of an output or
#: aggregate record (the src fields None when the header is missing or not a number).
Written = tuple[int, int, "str | None", "str | None", "int | None", "int | None", "str | None"]
#: (partition, offset, key, value) of a changelog record.
Change = tuple[int, int, "str | None", "str | None"]


@dataclass
class StreamsFacts:
    options: dict[str, Any]
    inputs: list[Input] = field(default_factory=list)
    outputs: list[Written] = field(default_factory=list)
    aggregates: list[Written] = field(default_factory=list)
    changelog: list[Change] = field(default_factory=list)
    #: The application's committed input offsets by partition (the next offset to read).
    committed: dict[int, int] = field(default_factory=dict)
    drained: bool = False
    #: What kept the run from finishing: a drain that timed out.
    incomplete: list[str] = field(default_factory=list)
    #: Final reads that did not reach their end: the run cannot be judged (a record missing
    #: from an incomplete read proves nothing).
    unread: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def groups(self) -> int:
        return int(self.options.get("groups", 4))

    @property
    def topics(self) -> dict[str, str]:
        o = self.options
        return {
            o["output_topic"]: "output",
            o["aggregate_topic"]: "aggregate",
            o["changelog_topic"]: "changelog",
        }


def _int(text: Any) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def read_facts(path: str | Path) -> StreamsFacts:
    """The facts of a merged history; :class:`CheckerInputError` for unusable input."""
    try:
        with iter_history(path) as reader:
            header = reader.header
            if header is None:
                raise CheckerInputError(f"{path}: empty history")
            options = dict((header.get("meta") or {}).get("workload_options") or {})
            need = ("input_topic", "output_topic", "aggregate_topic", "changelog_topic")
            if any(k not in options for k in need):
                raise CheckerInputError(f"{path}: not a streams history (no topics in its meta)")
            facts = StreamsFacts(options)
            reads: dict[tuple[str, int], bool] = {}
            for op in reader:
                _see(facts, op, reads)
            facts.notes += reader.warnings
    except HistoryError as e:
        raise CheckerInputError(str(e)) from None
    facts.unread += [f"{t}[{p}]" for (t, p), ok in sorted(reads.items()) if not ok]
    return facts


def _see(facts: StreamsFacts, op: dict[str, Any], reads: dict[tuple[str, int], bool]) -> None:
    if op["process"] != "final" or op["type"] == "invoke":
        return
    value = op.get("value") or {}
    f = op["f"]
    if f == "drain":
        facts.drained = op["type"] == "ok"
        if not facts.drained:
            facts.incomplete.append("the application did not commit past every input in time")
        facts.committed.update({int(p): int(o) for p, o in value.get("offsets") or []})
    elif f == "group-offsets" and op["type"] == "ok":
        topic = facts.options["input_topic"]
        facts.committed.update(
            {int(p): int(o) for t, p, o in value.get("offsets") or [] if t == topic}
        )
    elif f == "read" and value.get("isolation") == "read_committed":
        topic, partition = value["topic"], int(value["partition"])
        reads[(topic, partition)] = op["type"] == "ok"
        kind = "input" if topic == facts.options["input_topic"] else facts.topics.get(topic)
        for offset, key, raw, headers in value.get("records") or []:
            if kind == "input":
                facts.inputs.append((partition, offset, raw))
            elif kind == "changelog":
                facts.changelog.append((partition, offset, key, raw))
            elif kind in ("output", "aggregate"):
                h = headers or {}
                row = (
                    partition,
                    offset,
                    key,
                    raw,
                    _int(h.get(H_SRC_PARTITION)),
                    _int(h.get(H_SRC_OFFSET)),
                    h.get(H_SRC_VALUE),
                )
                (facts.outputs if kind == "output" else facts.aggregates).append(row)
