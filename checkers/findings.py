"""Known findings: a verdict's anomalies matched against the signatures of documented bugs.

Why: a user whose correct client is caught by a bug the project has already documented
(docs/findings.md) should read so next to the verdict, with a link, not only "duplicate". A
signature is a pure function of the merged verdict's examples; it names the finding and
says which example matched. The verdict stays invalid: a known bug is still a bug. A bug that
costs a client its producer but not exactly-once (F13) is named on a valid verdict, which
stays valid.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

#: Where the findings are written up (each has an anchor of its id in lower case).
FINDINGS_DOC = "docs/findings.md"


@dataclass(frozen=True)
class KnownFinding:
    id: str
    #: One line: what the bug is and whose.
    title: str
    #: Evidence lines of a verdict that matches (empty: it does not).
    signature: Callable[[dict[str, Any]], list[str]]
    #: A bug in Kafka itself: tried on every run, whichever client's library wrote it.
    kafka: bool = False
    #: What an operator does about it, one sentence (empty: nothing to do but avoid it).
    remedy: str = ""
    #: A bug that leaves exactly-once intact (a client refused where it should be fenced):
    #: tried on valid verdicts too, which it names without making them invalid.
    on_valid: bool = False

    @property
    def link(self) -> str:
        return f"{FINDINGS_DOC}#{self.id.lower()}"


def _examples(verdict: dict[str, Any], checker: str) -> list[dict[str, Any]]:
    res = (verdict.get("checkers") or {}).get(checker) or {}
    exs = res.get("examples") if isinstance(res, dict) else None
    return [e for e in exs if isinstance(e, dict)] if isinstance(exs, list) else []


def _copy_from(example: dict[str, Any], instance: int, partition: int) -> bool:
    """Whether a duplicate example has a copy written by ``instance`` from ``partition``."""
    for rec in example.get("records") or []:
        h = rec.get("headers") if isinstance(rec, dict) else None
        if isinstance(h, dict) and (h.get("instance"), h.get("src-partition")) == (
            str(instance),
            str(partition),
        ):
            return True
    return False


def _f5(verdict: dict[str, Any]) -> list[str]:
    """Duplicates whose second copy comes from a partition started below its committed offset
    after an assignment change while another transaction's offsets for it were pending."""
    dups = _examples(verdict, "duplicate")
    out = []
    for s in _examples(verdict, "started-below-committed"):
        waited, pending = s.get("waited") or [], s.get("pending")
        if len(waited) < 2 or not pending:
            continue
        inst, part = s.get("instance"), s.get("partition")
        copies = [d for d in dups if _copy_from(d, inst, part)]  # type: ignore[arg-type]
        if not copies:
            continue
        out.append(
            f"instance {inst} read partition {part} from offset "
            f"{s['first_read']['offset']}, below the committed {s['committed']['offset']}, "
            f"after {len(waited)} rebalance callbacks while transaction "
            f"{pending['txn']} of another instance had read it and not completed "
            f"({len(copies)} duplicate example(s) have a copy it wrote)"
        )
    return out


def _f7(verdict: dict[str, Any]) -> list[str]:
    """Duplicates committed by two members of a client that records no generation (generation
    header ``-1``: KafkaJS, whose offset commits carry no group metadata to fence a zombie)."""
    pairs: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for d in _examples(verdict, "duplicate"):
        writers = []
        for rec in d.get("records") or []:
            h = rec.get("headers") if isinstance(rec, dict) else None
            if not isinstance(h, dict) or h.get("generation") != "-1":
                break
            writers.append((str(h.get("instance")), str(h.get("txn-seq"))))
        else:
            if len({w[0] for w in writers}) >= 2:
                pairs.setdefault(tuple(sorted(set(writers))), []).append(str(d.get("input")))
    return [
        " and ".join(f"instance {i}'s transaction {t}" for i, t in writers)
        + f" both committed input {inputs[0]}, with no generation in the offset commit to "
        + f"fence the older member ({len(inputs)} duplicate example(s) have a copy from each)"
        for writers, inputs in sorted(pairs.items())
    ]


def _f9(verdict: dict[str, Any]) -> list[str]:
    """Open transactions the log evidence found prepared on their partition and completed by
    the coordinator without a marker there (``marker-skipped``)."""
    res = (verdict.get("checkers") or {}).get("hanging_in_log") or {}
    exs = ((res.get("examples") or {}) if isinstance(res, dict) else {}).get("marker-skipped")
    return [
        f"producer {e.get('producerId')}'s transaction at epoch {e.get('epoch')} left "
        f"{e.get('data_records')} record(s) open on {e.get('topic')}-{e.get('partition')} "
        f"(offsets {e.get('first_offset')}..{e.get('last_offset')}): "
        f"the coordinator's {e.get('prepared')} listed the partition, and it completed the "
        "transaction without a marker there"
        for e in (exs if isinstance(exs, list) else [])
        if isinstance(e, dict)
    ]


def _f13(verdict: dict[str, Any]) -> list[str]:
    """Commits refused with INVALID_TXN_STATE (``invalid-state-commit``): KAFKA-20785."""
    return [
        f"instance {e.get('instance')}'s transaction {e.get('txn_seq')} was refused at its "
        f"commit with {e.get('code')}, an error its client must take as fatal, where the "
        "coordinator should have fenced the producer"
        for e in _examples(verdict, "invalid-state-commit")
    ]


def _f14(verdict: dict[str, Any]) -> list[str]:
    """Acknowledged offset commits read back lower (``lost-commit``): KAFKA-20634."""
    res = (verdict.get("checkers") or {}).get("offsets") or {}
    exs = ((res.get("examples") or {}) if isinstance(res, dict) else {}).get("lost-commit")
    return [
        f"group {e.get('group')} was told its commit of offset {e.get('acknowledged_offset')} "
        f"on {e.get('topic')}-{e.get('partition')} succeeded, and its committed offset read "
        f"{e.get('read_offset')} afterwards"
        for e in (exs if isinstance(exs, list) else [])
        if isinstance(e, dict)
    ]


KNOWN: tuple[KnownFinding, ...] = (
    KnownFinding(
        "F5",
        "librdkafka starts a partition at auto.offset.reset when a rebalance interrupts its "
        "wait on pending transactional offsets",
        _f5,
    ),
    KnownFinding(
        "F7",
        "KafkaJS commits transactional offsets without group metadata, so a zombie member "
        "is not fenced",
        _f7,
    ),
    KnownFinding(
        "F9",
        "a transaction coordinator completes a transaction without the marker of a partition "
        "that had no leader when the marker was sent (Kafka 4.3.0 on)",
        _f9,
        kafka=True,
        remedy="once each partition has its leader back, Kafka's own tool releases it: "
        "kafka-transactions.sh --bootstrap-server BROKERS find-hanging --broker-id N "
        "--max-transaction-timeout 1 lists the open transaction, and kafka-transactions.sh "
        "abort --topic TOPIC --partition P --start-offset FIRST (the first offset above) "
        "aborts it, after which read_committed consumers move on; the harness never does it "
        "for you",
    ),
    KnownFinding(
        "F13",
        "under transaction version 2 a commit that reaches the coordinator after its timeout "
        "rolled the transaction back is refused with a fatal INVALID_TXN_STATE instead of "
        "PRODUCER_FENCED (KAFKA-20785)",
        _f13,
        kafka=True,
        remedy="a client that takes the refusal as fatal must be restarted (a Kafka Streams "
        "thread dies of it and is replaced); nothing committed is lost, and Kafka's fix "
        "(apache/kafka#23204) answers PRODUCER_FENCED",
        on_valid=True,
    ),
    KnownFinding(
        "F14",
        "a group coordinator whose __consumer_offsets partition moved away acknowledges "
        "offset commits it then loses (KAFKA-20634, Kafka 4.x before 4.3.1)",
        _f14,
        kafka=True,
        remedy="upgrade the brokers to 4.3.1 or later; a group that lost a commit resumes "
        "from its previous committed offset and processes those records again, so there is "
        "nothing to repair, but a consumer that relies on commitSync for exactly-once "
        "bookkeeping of its own must expect it",
    ),
)


def known_findings(
    verdict: dict[str, Any], findings: Collection[str] | None = None
) -> list[dict[str, Any]]:
    """The documented findings an invalid verdict matches, of those its client's library is
    known for (``findings``: the ids its manifest lists, recorded in the run's options as
    ``client_findings``; None: not recorded, every finding is tried) and every finding in
    Kafka itself, each ``{"id", "title", "link", "evidence", "kafka", "remedy",
    "on_valid"}``. Nothing for an unknown verdict; for a valid one, only the findings with
    ``on_valid``. A run of a client whose library has no such bug is not matched: a
    signature reads the history's shape, and two libraries can leave the same shape for
    different reasons (KafkaJS and Confluent's JavaScript client both record generation -1,
    only one commits offsets without it)."""
    valid = verdict.get("valid")
    out = []
    for k in KNOWN:
        if valid is not False and not (valid is True and k.on_valid):
            continue
        if findings is not None and not k.kafka and k.id not in findings:
            continue
        evidence = k.signature(verdict)
        if evidence:
            out.append(
                {
                    "id": k.id,
                    "title": k.title,
                    "link": k.link,
                    "evidence": evidence,
                    "kafka": k.kafka,
                    "remedy": k.remedy,
                    "on_valid": k.on_valid,
                }
            )
    return out


def finding_lines(verdict: dict[str, Any]) -> list[str]:
    """One line per known finding a verdict records (``known_findings``), for a summary."""
    return [
        f"known finding {f['id']}: {f['title']} ({f['link']})"
        for f in verdict.get("known_findings") or []
        if isinstance(f, dict)
    ]
