"""The scenarios a matrix runs, and their expansion into cells (version x scenario x TV).

Why a separate module: which scenarios exist, which transaction versions a Kafka line supports
and which client can speak which one are pure rules that the tests pin down without a cluster;
``harness.nightly.matrix`` only runs what this module lists.

A *scenario* is one ``python -m harness run`` configuration (workload and its flags, client,
nemesis, time limit) plus what the verdict must be; any workload of the registry
(``harness.run.workloads``) can be one. Correct scenarios are expected ``valid``; broken-on-purpose
variants are expected ``invalid`` and count as a pass when the checkers catch them. A scenario
names the transaction versions it wants; on a Kafka line that cannot format them (3.x has no
``transaction.version`` feature) it runs once with the default (recorded as TV 0).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from types import SimpleNamespace
from typing import Any

from common.errors import HarnessError
from harness.kafka.versions import KafkaVersion
from nemeses.recipes import RECIPES
from workloads import client_registry

#: The transaction versions each client speaks, from its manifest (``workloads/manifests``):
#: librdkafka (confluent-kafka) and KafkaJS do not implement KIP-890; Kafka's Java client (the
#: project's ``java`` processors and Kafka's ``copier``) and franz-go do.
CLIENT_TVS: dict[str, tuple[int, ...]] = {
    name: m.abilities.transaction_versions for name, m in client_registry.manifests().items()
}


@dataclass(frozen=True)
class Scenario:
    """One run configuration and its expected verdict."""

    name: str
    #: A workload of the registry, and the flags of the run: the workload's own, the
    #: cluster's shape (``--nodes``, ``--broker-config``, ``--replication-factor``,
    #: ``--min-insync-replicas``) and the clients' knobs (``--client-config``,
    #: ``--group-protocol``, ``--txn-delay-ms``), as ``python -m harness run`` takes them.
    workload: str = "eos"
    flags: tuple[str, ...] = ()
    #: The client library (decides the transaction versions it can run); the registry's
    #: default when not given.
    client: str = field(default_factory=lambda: client_registry.default("eos"))
    #: The eos variant (``eos`` for every other workload), shown in the matrix.
    variant: str = "eos"
    nemesis: str = "none"
    time_limit: float = 20.0
    #: Transaction versions to run on lines that support a choice (Kafka >= 4.0).
    tvs: tuple[int, ...] = (0,)
    expected: str = "valid"
    #: Seconds between faults and how long each lasts; short runs need short ones, or the
    #: first fault (due one interval after the start) never comes.
    nemesis_interval: float = 5.0
    nemesis_duration: float = 5.0
    #: The oldest Kafka the scenario can run on (``--group-protocol consumer``: 4.0.0);
    #: older versions do not get the cell.
    min_kafka: str | None = None
    #: The first Kafka it no longer runs on (a Kafka bug's fix version, for a scenario that
    #: expects the bug's verdict); None: every version from ``min_kafka`` on.
    before_kafka: str | None = None
    #: The finding (docs/findings.md) the scenario reproduces: its verdict must name it
    #: (``known_findings``), and a cell whose verdict does not says the finding no longer
    #: reproduces on its version.
    finding: str | None = None

    def runs_on(self, version: str) -> bool:
        v = KafkaVersion(version)
        if self.before_kafka is not None and v >= KafkaVersion(self.before_kafka):
            return False
        return self.min_kafka is None or v >= KafkaVersion(self.min_kafka)

    def run_args(self) -> list[str]:
        """The ``python -m harness run`` arguments of this scenario (no version, store, TV)."""
        args = ["--workload", self.workload, *self.flags, "--nemesis", self.nemesis]
        if self.nemesis != "none":
            args += ["--nemesis-interval", f"{self.nemesis_interval:g}"]
            args += ["--nemesis-duration", f"{self.nemesis_duration:g}"]
        return args


def eos(
    name: str,
    client: str | None = None,
    variant: str = "eos",
    extra: tuple[str, ...] = (),
    **kw: Any,
) -> Scenario:
    """An eos scenario: its client and variant are flags of the eos workload; ``extra`` are
    any other flags of the run; ``client`` is the registry's default when not given."""
    client = client or client_registry.default("eos")
    flags = ("--client", client) + (("--variant", variant) if variant != "eos" else ())
    return Scenario(name, "eos", flags + extra, client, variant, **kw)


def delayed_endtxn(name: str, client: str | None = None, **kw: Any) -> Scenario:
    """A correct eos client under the ``delayed-endtxn`` recipe (docs/findings.md, F2), with
    the delays inside each transaction the recipe asks for."""
    extra = ("--txn-delay-ms", "100")
    return eos(name, client, extra=extra, nemesis="delayed-endtxn", time_limit=45, **kw)


def recipe_flags(name: str) -> tuple[str, ...]:
    """The run flags recipe ``name`` advises (``Recipe.with_flags``) but ``--workload``,
    which a scenario names itself."""
    return tuple(
        arg
        for flag in RECIPES[name].with_flags
        if not flag.startswith("--workload ")
        for arg in flag.split()
    )


def bug_pair(
    make: Callable[..., Scenario],
    bug: tuple[str, str | None, str | None],
    control: tuple[str, str | None, str | None],
    finding: str | None = None,
) -> tuple[Scenario, Scenario]:
    """A Kafka bug's exposed scenario, expected invalid (naming ``finding``), and its control,
    expected valid, each given as ``(name, min_kafka, before_kafka)``: the versions where the
    bug lives and where it does not. ``make`` builds a scenario from a name and fields."""
    name, first, before = bug
    exposed = make(name, expected="invalid", min_kafka=first, before_kafka=before, finding=finding)
    name, first, before = control
    return exposed, make(name, expected="valid", min_kafka=first, before_kafka=before)


@dataclass(frozen=True)
class Cell:
    """One run of the matrix: a scenario on one Kafka version with one transaction version."""

    version: str
    scenario: Scenario
    #: None when the version has no choice (3.x): the run passes no ``--transaction-version``.
    transaction_version: int | None
    time_limit: float
    #: The run's ``--security`` (a secured cell is a column of its own).
    security: str = "plaintext"

    @property
    def tv_label(self) -> int:
        return self.transaction_version or 0

    @property
    def _secured(self) -> str:
        return "" if self.security == "plaintext" else f"/{self.security}"

    @property
    def scenario_id(self) -> str:
        """The matrix column: the scenario name plus the transaction version it ran with (and
        the security mode, when secured)."""
        return f"{self.scenario.name}/tv{self.tv_label}{self._secured}"

    @property
    def cell_id(self) -> str:
        """A file-system-safe unique name, used for the cell's store directory."""
        return f"{self.version}-{self.scenario.name}-tv{self.tv_label}" + self._secured.replace(
            "/", "-"
        )

    def run_args(self, seed: int | None) -> list[str]:
        args = [*self.scenario.run_args(), "--kafka-version", self.version]
        args += ["--time-limit", f"{self.time_limit:g}"]
        if self.security != "plaintext":
            args += ["--security", self.security]
        if self.transaction_version is not None:
            args += ["--transaction-version", str(self.transaction_version)]
        if seed is not None:
            args += ["--seed", str(seed)]
        return args


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        eos("eos-python-kill-processor", nemesis="kill-processor", time_limit=20),
        Scenario(
            "queue-kill-processor",
            workload="queue",
            flags=("--sub-via", "assign"),
            nemesis="kill-processor",
            time_limit=20,
        ),
        eos("eos-python-none", time_limit=10),
        eos("eos-python-partition", nemesis="partition", time_limit=30),
        eos("eos-python-pauses", nemesis="pause,pause-processor", time_limit=30),
        eos("eos-python-zombie", nemesis="zombie", time_limit=30),
        eos("eos-python-kills", nemesis="kill,kill-processor", time_limit=30),
        eos("eos-python-late", nemesis="late-request,slow", time_limit=30),
        eos("eos-python-all", nemesis="all", time_limit=60),
        # The project's Java processors: the same history as the Python ones, on the client
        # that speaks transaction version 2, so TV0 and TV2 compare op by op.
        eos("eos-java", client="java", time_limit=10, tvs=(2,)),
        eos("eos-java-tv0-tv2", client="java", time_limit=10, tvs=(0, 2)),
        eos("eos-java-kills", client="java", nemesis="kill", time_limit=30, tvs=(0, 2)),
        eos(
            "eos-java-crash-clients",
            client="java",
            nemesis="crash-clients,kill-processor",
            time_limit=30,
            tvs=(0, 2),
        ),
        Scenario(
            "queue-java-kill-processor",
            workload="queue",
            flags=("--sub-via", "assign", "--client", "java"),
            client="java",
            nemesis="kill-processor",
            time_limit=20,
            tvs=(2,),
        ),
        # Kafka's own TransactionalMessageCopier: judged by the final drain only.
        eos("eos-copier", client="copier", time_limit=10, tvs=(2,)),
        eos("eos-copier-tv0-tv2", client="copier", time_limit=10, tvs=(0, 2)),
        eos(
            "broken-at-least-once",
            variant="at-least-once",
            # A zombie (paused past the 10 s session timeout before its commit step) exposes
            # it every time; a random kill rarely lands in the window (see README).
            nemesis="kill-processor,zombie",
            time_limit=30,
            nemesis_interval=3,
            nemesis_duration=15,
            expected="invalid",
        ),
        # The knobs a Jepsen user turns: random pauses inside each transaction (the recipe of
        # KAFKA-17754) with tighter client timeouts; KIP-848 consumer groups; five nodes.
        eos(
            "eos-python-txn-delay",
            extra=("--txn-delay-ms", "20", "--client-config", "request.timeout.ms=5000"),
            nemesis="kill-processor,pause",
            time_limit=30,
        ),
        eos(
            "eos-python-consumer-protocol",
            extra=("--group-protocol", "consumer"),
            nemesis="kill-processor",
            time_limit=30,
            min_kafka="4.0.0",
        ),
        eos(
            "eos-python-5-nodes",
            extra=("--nodes", "5", "--replication-factor", "5", "--min-insync-replicas", "3"),
            nemesis="kill,partition",
            time_limit=30,
        ),
        # Caught without any fault: the seeder's aborted batches are read and transformed.
        eos(
            "broken-read-uncommitted", variant="read-uncommitted", time_limit=10, expected="invalid"
        ),
        eos(
            "broken-offsets-outside-txn",
            variant="offsets-outside-txn",
            # A zombie (paused past the 10 s session timeout before its commit step) exposes
            # it every time; a random kill rarely lands in the window (see README).
            nemesis="kill-processor,zombie",
            time_limit=30,
            nemesis_interval=3,
            nemesis_duration=15,
            expected="invalid",
        ),
        # Kafka Connect exactly-once source (KIP-618): worker JVMs killed, paused past their
        # session timeout and cut off, with the task count changing under them; the
        # at-least-once source duplicates after worker kills.
        Scenario(
            "connect-all",
            workload="connect",
            client="java",
            nemesis="all",
            time_limit=90,
            nemesis_interval=8,
            nemesis_duration=8,
        ),
        Scenario(
            "connect-worker-faults",
            workload="connect",
            flags=("--boundary", "interval"),
            client="java",
            nemesis="kill-processor,zombie,cut-processor,roll-processors",
            time_limit=60,
            nemesis_interval=6,
            nemesis_duration=8,
        ),
        Scenario(
            "broken-connect-at-least-once",
            workload="connect",
            flags=("--exactly-once", "disabled"),
            client="java",
            variant="at-least-once",
            nemesis="kill-processor",
            time_limit=45,
            nemesis_interval=12,
            expected="invalid",
        ),
        # Kafka Streams under exactly_once_v2: instances killed, paused past their session
        # timeout and crashed, broker faults; at_least_once double-counts after kills.
        Scenario(
            "streams-all",
            workload="streams",
            client="java",
            nemesis="all",
            time_limit=60,
            nemesis_interval=8,
            nemesis_duration=8,
        ),
        Scenario(
            "streams-instance-faults",
            workload="streams",
            client="java",
            nemesis="kill-processor,zombie,crash-clients",
            time_limit=45,
            nemesis_interval=6,
            nemesis_duration=8,
        ),
        Scenario(
            "broken-streams-at-least-once",
            workload="streams",
            flags=("--variant", "at-least-once"),
            client="java",
            variant="at-least-once",
            nemesis="kill-processor",
            time_limit=30,
            nemesis_interval=8,
            expected="invalid",
        ),
        # Share groups (KIP-932, GA in 4.2): members paused past their locks, killed with
        # records acquired, broker faults at the share-partition leaders and the group
        # coordinator; a member that commits before it processes loses records when killed.
        *(
            Scenario(
                name,
                workload="share",
                client=client,
                nemesis="all",
                time_limit=60,
                nemesis_interval=6,
                nemesis_duration=17,  # past the 15 s record lock
                min_kafka="4.2.0",
            )
            for name, client in (("share-all", "python"), ("share-java-all", "java"))
        ),
        Scenario(
            "broken-share-accept-before-process",
            workload="share",
            flags=("--variant", "accept-before-process"),
            nemesis="crash-clients",
            time_limit=30,
            expected="invalid",
            min_kafka="4.2.0",
        ),
        # KAFKA-20742 (F11): partitions added under load start at the latest offset under
        # share.auto.offset.reset=latest before 4.4.0 (records lost); from 4.4.0 at 0.
        *bug_pair(
            partial(
                Scenario,
                workload="share",
                flags=("--share-offset-reset", "latest"),
                nemesis="kafka-20742",
                time_limit=60,
            ),
            ("bug-kafka-20742", "4.2.0", "4.4.0"),
            ("fixed-kafka-20742", "4.4.0", None),
        ),
        # F9: a transaction rolled back while its partitions have no leader completes
        # without their markers from Kafka 4.3.0 (the Java metadata cache); 4.2.x waits.
        *bug_pair(
            partial(eos, nemesis="leaderless-marker", time_limit=60),
            ("bug-f9-leaderless-marker", "4.3.0", None),
            ("control-f9-leaderless-marker", None, "4.3.0"),
            finding="F9",
        ),
        # F13 (KAFKA-20785): a commit held past the coordinator's timeout rollback is refused
        # with a fatal INVALID_TXN_STATE under transaction version 2 (no release has the
        # fix yet); exactly-once holds, so the run is valid and names F13. Under transaction
        # version 0 the same commit is fenced: the control, valid without F13.
        eos(
            "bug-kafka-20785",
            "java",
            nemesis="kafka-20785",
            time_limit=40,
            tvs=(2,),
            min_kafka="4.0.0",
            finding="F13",
        ),
        eos("control-kafka-20785-tv0", "java", nemesis="kafka-20785", time_limit=40, tvs=(0,)),
        # F14 (KAFKA-20634): a group coordinator whose offsets partition moved away
        # acknowledges commits it then loses, on 4.3.0; 4.3.1 ignores the new leader's high
        # watermark once the partition is a follower's (the fix).
        *bug_pair(
            partial(
                Scenario,
                workload="offsets",
                flags=recipe_flags("kafka-20634"),
                nemesis="kafka-20634",
                time_limit=45,
            ),
            ("bug-kafka-20634", "4.3.0", "4.3.1"),
            ("fixed-kafka-20634", "4.3.1", None),
            finding="F14",
        ),
        # Real Kafka bugs (docs/findings.md): a correct client, and the verdict Kafka's bug
        # makes of it. KAFKA-17754's delayed EndTxn commits the next transaction wherever
        # the client speaks transaction version 0 (librdkafka always; Java on 3.x or TV0);
        # transaction version 2 (Java on 4.x) refuses it: the control.
        delayed_endtxn("bug-delayed-endtxn-python", expected="invalid"),
        delayed_endtxn("bug-delayed-endtxn-java-tv0", "java", tvs=(0,), expected="invalid"),
        delayed_endtxn("fixed-delayed-endtxn-java-tv2", "java", tvs=(2,), min_kafka="4.0.0"),
        # Every client of the registry under the same faults: the client axis. KafkaJS sends
        # no group metadata with its offsets (F7): a zombie commits beside its successor;
        # Confluent's JavaScript client (librdkafka underneath) sends it: the zombie is fenced.
        eos("eos-franz-go-none", client="franz-go", time_limit=10, tvs=(0, 2)),
        eos("eos-franz-go-zombie", client="franz-go", nemesis="zombie", time_limit=30),
        eos("eos-franz-go-all", client="franz-go", nemesis="all", time_limit=60),
        eos("eos-kafkajs-none", client="kafkajs", time_limit=10),
        eos(
            "bug-zombie-kafkajs",
            client="kafkajs",
            nemesis="zombie",
            time_limit=30,
            extra=("--session-timeout-ms", "6000"),
            expected="invalid",
        ),
        eos("eos-confluent-js-none", client="confluent-js", time_limit=10),
        eos(
            "eos-confluent-js-zombie",
            client="confluent-js",
            nemesis="zombie",
            time_limit=30,
            extra=("--session-timeout-ms", "6000"),
        ),
    )
}

SCENARIO_SETS: dict[str, tuple[str, ...]] = {
    # ~6 cells for two versions: fits in about a quarter of an hour on 2 cores.
    "smoke": ("eos-python-kill-processor", "eos-java", "broken-read-uncommitted"),
    "tiny": ("eos-python-none",),
    "nightly": (
        "eos-python-kill-processor",
        "eos-python-partition",
        "eos-python-pauses",
        "eos-python-zombie",
        "eos-python-late",
        "eos-java-tv0-tv2",
        "eos-java-kills",
        "eos-java-crash-clients",
        "eos-copier-tv0-tv2",
        "queue-kill-processor",
        "queue-java-kill-processor",
        "broken-read-uncommitted",
        "broken-at-least-once",
        "broken-offsets-outside-txn",
        "connect-all",
        "connect-worker-faults",
        "broken-connect-at-least-once",
        "streams-all",
        "broken-streams-at-least-once",
        "share-all",
        "broken-share-accept-before-process",
    ),
    "broken": (
        "broken-read-uncommitted",
        "broken-at-least-once",
        "broken-offsets-outside-txn",
        "broken-connect-at-least-once",
        "broken-streams-at-least-once",
        "broken-share-accept-before-process",
    ),
    "connect": ("connect-all", "connect-worker-faults", "broken-connect-at-least-once"),
    "streams": ("streams-all", "streams-instance-faults", "broken-streams-at-least-once"),
    "share": (
        "share-all",
        "share-java-all",
        "broken-share-accept-before-process",
        "bug-kafka-20742",
        "fixed-kafka-20742",
    ),
    "knobs": ("eos-python-txn-delay", "eos-python-consumer-protocol", "eos-python-5-nodes"),
    # A Kafka or client release that fixes or re-breaks one shows in ``trends``.
    "known-bugs": (
        "bug-delayed-endtxn-python",
        "bug-delayed-endtxn-java-tv0",
        "fixed-delayed-endtxn-java-tv2",
        "bug-zombie-kafkajs",
        "bug-kafka-20742",
        "fixed-kafka-20742",
        "bug-f9-leaderless-marker",
        "control-f9-leaderless-marker",
        "bug-kafka-20785",
        "control-kafka-20785-tv0",
        "bug-kafka-20634",
        "fixed-kafka-20634",
    ),
    # The same faults on every client of the registry (python and java: the nightly set).
    "clients": (
        "eos-python-zombie",
        "eos-franz-go-none",
        "eos-franz-go-zombie",
        "eos-franz-go-all",
        "eos-kafkajs-none",
        "bug-zombie-kafkajs",
        "eos-confluent-js-none",
        "eos-confluent-js-zombie",
    ),
}


def resolve_scenarios(spec: str) -> list[Scenario]:
    """A set name (``smoke``) or a comma list of set and scenario names, in order, no repeats."""
    out: list[Scenario] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        names = SCENARIO_SETS.get(part) or ((part,) if part in SCENARIOS else None)
        if names is None:
            known = ", ".join([*SCENARIO_SETS, *SCENARIOS])
            raise HarnessError(f"unknown scenario or set {part!r} (known: {known})")
        out += [SCENARIOS[n] for n in names if SCENARIOS[n] not in out]
    if not out:
        raise HarnessError("--scenarios names no scenario")
    return out


def transaction_versions(version: str, scenario: Scenario) -> list[int | None]:
    """The TVs ``scenario`` runs with on ``version``: its wanted ones the line and the client
    support, or [None] (the line's default) when the line offers no choice or none fits."""
    if not KafkaVersion(version).supports_transaction_version:
        return [None]
    usable = [tv for tv in scenario.tvs if tv in CLIENT_TVS[scenario.client]]
    return list(usable) or [None]


def security_gap(scenario: Scenario, mode: str) -> str | None:
    """Why ``scenario`` cannot run on a cluster secured as ``mode`` says (None: it can): its
    workload or client takes no ``security`` object."""
    from harness.run.workloads import security_problem

    client = scenario.client if scenario.workload == "eos" else None
    return security_problem(mode, scenario.workload, SimpleNamespace(client=client))  # type: ignore[arg-type]


def expand(
    versions: list[str],
    scenarios: list[Scenario],
    time_limit: float | None = None,
    security: str = "plaintext",
) -> list[Cell]:
    """Every cell, version-major (so one Kafka installation is used at a time); on a secured
    matrix, only the scenarios that can run secured (:func:`security_gap`)."""
    cells = []
    for v in versions:
        for s in scenarios:
            if not s.runs_on(v) or security_gap(s, security) is not None:
                continue
            tl = time_limit if time_limit is not None else s.time_limit
            cells += [Cell(v, s, tv, tl, security) for tv in transaction_versions(v, s)]
    return cells
