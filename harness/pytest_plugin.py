"""pytest plugin: real Kafka clusters as fixtures (registered via the ``pytest11`` entry point).

Each pytest-xdist worker gets its own cluster (own slot: subnet, ports, namespace names), built
once per worker session and torn down at its end, so ``pytest -n auto`` runs clusters side by
side without collisions. Another project can depend on this package and use the fixtures:

* ``kafka_cluster`` (session) / ``healthy_cluster`` (faults undone after the test);
  ``docker_cluster`` (session, Docker backend) / ``any_cluster`` (each backend in turn);
* ``nemesis``: a factory of seeded fault schedules run against the worker's cluster;
* ``history``: a per-test history directory with recorders and a merged loader;
* ``spark``: one embedded Spark session per worker for the checkers;
* ``run_report``: links a test to its run's HTML report in JUnit XML and pytest-html;
* ``scenario``: runs any registered workload (``harness.run.workloads``) on the worker's
  cluster under a seeded schedule and returns the checkers' verdict, the run and its report.

Options: ``--kafka-version``, ``--nodes``, ``--store``, ``--time-limit``, ``--seed``,
``--nemesis`` (defaults for the scenarios, which may scale them); the cluster's shape
``--broker-config KEY=VALUE``, ``--replication-factor``, ``--min-insync-replicas``,
``--broker-patch NAME`` (a fix given to every broker, ``harness.kafka.brokerpatch``); and the
knobs of the clients under test ``--client-config KEY=VALUE``, ``--group-protocol``,
``--txn-delay-ms``, given to every scenario whose workload takes them (a scenario whose client
cannot, Kafka's Java copier, is skipped with the reason).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.kafka.versions import DEFAULT_KAFKA_VERSION


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kafka-harness")
    group.addoption("--kafka-version", default=DEFAULT_KAFKA_VERSION, help="Kafka to test")
    group.addoption("--nodes", type=int, default=3, help="nodes per cluster")
    group.addoption(
        "--backend",
        default="process",
        choices=("process", "docker", "ssh"),
        help="what the workers' clusters (kafka_cluster) run on: JVM processes, containers, "
        "or the machines of --hosts",
    )
    group.addoption(
        "--hosts",
        default=None,
        metavar="FILE",
        help="--backend ssh: the hosts file (python -m harness ssh-lab up writes one)",
    )
    from harness.substrate.ssh.hosts import add_host_key_argument

    add_host_key_argument(group.addoption)
    group.addoption("--store", default="store", help="where runs keep their evidence")
    group.addoption("--time-limit", type=float, default=None, help="seconds of load per scenario")
    group.addoption("--seed", type=int, default=None, help="seed of workloads and schedules")
    from harness.run.arguments import add_nemesis_arguments

    add_nemesis_arguments(
        group.addoption,
        default=None,
        why="given, it overrides the faults of every correct-workload scenario "
        "(default: each scenario's own)",
        timing=False,
    )
    group.addoption(
        "--broker-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker setting of every worker's cluster (repeatable)",
    )
    group.addoption("--replication-factor", type=int, default=None, help="of every topic")
    group.addoption("--min-insync-replicas", type=int, default=None, help="of every topic")
    group.addoption(
        "--broker-patch", default=None, metavar="NAME", help="a fix given to every broker"
    )
    group.addoption(
        "--security",
        default="plaintext",
        choices=("plaintext", "tls", "sasl_ssl"),
        help="every worker's cluster secured so (scenarios that cannot run on it are skipped)",
    )
    group.addoption(
        "--client-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting of the clients under test in every scenario (repeatable)",
    )
    group.addoption("--group-protocol", default=None, choices=("classic", "consumer"))
    group.addoption(
        "--txn-delay-ms",
        type=int,
        default=None,
        metavar="MAX",
        help="a random pause in [0, MAX] ms between a transaction's operations",
    )


#: Fixtures that hand out a real Kafka cluster. A test asking for one is marked ``cluster``
#: when collected, so ``-m "not cluster"`` leaves it out without a mark written by hand.
CLUSTER_FIXTURES = frozenset(
    {"kafka_cluster", "docker_cluster", "healthy_cluster", "any_cluster", "nemesis", "scenario"}
)
#: Fixtures that start a Spark JVM; a test asking for one is marked ``spark``.
SPARK_FIXTURES = frozenset({"spark"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cluster: needs a real Kafka cluster")
    config.addinivalue_line("markers", "spark: starts an embedded Spark session (a JVM)")


@pytest.hookimpl(tryfirst=True)  # before -m deselects: the marks must be there by then
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & CLUSTER_FIXTURES:
            item.add_marker(pytest.mark.cluster)
        if names & SPARK_FIXTURES:
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def harness_store(request: pytest.FixtureRequest) -> Path:
    # Unique per session: two pytest processes (or xdist workers) must never share the
    # directories their clusters write node configs and evidence into.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    session = f"{time.strftime('%Y%m%dT%H%M%S')}-{worker}-{os.getpid()}"
    path = Path(request.config.getoption("--store")).resolve() / "pytest" / session
    path.mkdir(parents=True, exist_ok=True)
    return path


def _shape(config: pytest.Config) -> argparse.Namespace:
    """The suite's flags that every run's options take (the workers' clusters are shaped so),
    as a command's parsed flags, for ``harness.run.arguments.options_from_args``."""
    option = config.getoption
    return argparse.Namespace(
        kafka_version=option("--kafka-version"),
        store=option("--store"),
        nodes=option("--nodes"),
        broker_config=option("--broker-config"),
        replication_factor=option("--replication-factor"),
        min_insync_replicas=option("--min-insync-replicas"),
        broker_patch=option("--broker-patch"),
        security=option("--security"),
        backend=option("--backend"),
        hosts=option("--hosts"),
        accept_new_host_keys=option("--accept-new-host-keys"),
    )


def _cluster_config(request: pytest.FixtureRequest, store: Path) -> Any:
    """A worker's cluster: it outlives the runs on it, which keep no log dump (their records
    are mixed with every other test's), so it dumps none at the end either (a whole
    session's segments took 45 s to dump)."""
    from common.settings import parse_settings
    from harness.substrate.api import ClusterConfig

    option = request.config.getoption
    return ClusterConfig(
        dump_logs=False,
        nodes=option("--nodes"),
        kafka_version=option("--kafka-version"),
        store=store,
        broker_settings=parse_settings(option("--broker-config"), "--broker-config"),
        replication_factor=option("--replication-factor"),
        min_insync_replicas=option("--min-insync-replicas"),
        broker_patch=option("--broker-patch"),
        security=option("--security"),
        hosts=option("--hosts"),
        accept_new_host_keys=option("--accept-new-host-keys"),
    )


@pytest.fixture(scope="session")
def kafka_cluster(request: pytest.FixtureRequest, harness_store: Path) -> Iterator[object]:
    """A ready cluster shared by the tests of one worker; faults are healed after each use.
    ``--backend docker`` makes it a cluster of containers (the suite runs on either)."""
    from harness.substrate.backends import open_cluster

    cfg = _cluster_config(request, harness_store / "cluster")
    with open_cluster(cfg, request.config.getoption("--backend")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def docker_cluster(request: pytest.FixtureRequest, harness_store: Path) -> Iterator[object]:
    """Like ``kafka_cluster``, on the Docker backend; the test is skipped when no Docker
    engine answers (``./bootstrap.sh`` starts one where it can)."""
    from harness.substrate.backends import docker_engine_available
    from harness.substrate.docker.cluster import DockerCluster

    if request.config.getoption("--backend") == "docker":
        yield request.getfixturevalue("kafka_cluster")  # one Docker cluster per worker
        return
    if not docker_engine_available():
        pytest.skip("no Docker engine answers")
    with DockerCluster(_cluster_config(request, harness_store / "docker-cluster")) as cluster:
        yield cluster


def _healed(cluster: Any) -> None:
    cluster.heal_all()
    for node in cluster.nodes:
        if not node.alive():
            cluster.start_node(node.node_id)


@pytest.fixture
def healthy_cluster(kafka_cluster):  # type: ignore[no-untyped-def]
    """The worker's cluster, with every fault undone after the test (pass or fail)."""
    yield kafka_cluster
    _healed(kafka_cluster)


@pytest.fixture(params=["process", "docker"])
def any_cluster(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """``healthy_cluster`` on each backend in turn: a test taking it runs once per backend
    (the Docker run skipped where no engine answers)."""
    if request.param == "process" and request.config.getoption("--backend") == "docker":
        pytest.skip("--backend docker: the workers' clusters are containers")
    name = "kafka_cluster" if request.param == "process" else "docker_cluster"
    cluster = request.getfixturevalue(name)
    yield cluster
    _healed(cluster)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist may be absent or disabled
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` without oversubscription: every worker runs a 3-JVM cluster plus clients,
    so at most one worker per core and per 6 GiB of memory. On ``--backend ssh`` one worker:
    the machines of the hosts file hold one cluster at a time."""
    if config.getoption("--backend") == "ssh":
        return 1
    cores = os.cpu_count() or 1
    try:
        mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem_gib = 8.0
    return max(1, min(cores, int(mem_gib // 6)))


@pytest.fixture(scope="session")
def _spark_until_the_end() -> Iterator[None]:
    """Ends the worker's Spark JVM after its last test."""
    yield
    from checkers.spark import stop_spark

    stop_spark()


@pytest.fixture
def spark(_spark_until_the_end: None) -> object:
    """The worker's embedded Spark session, shared by every check of its tests (starting
    Spark costs seconds; the checkers reuse a running session and leave it running). Asked
    for per test: a module of tests that ends the JVM it used (its own ``spark`` fixture)
    leaves no dead session behind for the next test here, which gets a new one."""
    from checkers.spark import start_spark

    return start_spark()


class HistoryDir:
    """A test's history: per-process recorders in one directory, merged on demand."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.processes = path / "processes"
        self.processes.mkdir(parents=True, exist_ok=True)

    def recorder(self, process: str | int, meta: dict[str, Any] | None = None) -> Any:
        from history import Recorder

        return Recorder(self.processes / f"{process}.jsonl", process, meta)

    def load(self) -> list[dict[str, Any]]:
        """Merge every per-process file into ``history.jsonl`` and return its ops."""
        from history import load_history, merge_histories

        merged = self.path / "history.jsonl"
        merge_histories(sorted(self.processes.glob("*.jsonl")), merged)
        return load_history(merged)


@pytest.fixture
def history(request: pytest.FixtureRequest, harness_store: Path) -> HistoryDir:
    """A fresh history directory for this test under the session's store."""
    name = request.node.name.replace("/", "_").replace("[", "-").rstrip("]")
    return HistoryDir(harness_store / "histories" / f"{name}-{os.getpid()}-{time.time_ns()}")


@pytest.fixture
def nemesis(
    healthy_cluster: Any, request: pytest.FixtureRequest, harness_store: Path
) -> Iterator[Callable[..., Any]]:
    """``with nemesis("pause,kill", time_limit=20, clients=workload) as engine:`` runs a
    seeded schedule against the worker's cluster (and the workload's processes, if given) and
    stops it at exit; the cluster is healed after the test either way. The schedule is a
    run's (``harness.run.nemesis``): ``all`` leaves out what this cluster and these clients
    cannot serve, with the reasons in ``schedule.json``, saved with the faults' history in
    ``nemeses/<test>-<n>/`` of the session's store."""
    from harness.run.arguments import options_from_args
    from harness.run.nemesis import ScheduledNemesis
    from harness.run.options import RunContext

    started: list[tuple[ScheduledNemesis, RunContext]] = []

    @contextlib.contextmanager
    def run(
        kinds: str,
        *,
        time_limit: float = 30.0,
        seed: int | None = None,
        interval: float = 5.0,
        duration: float = 5.0,
        clients: Any = None,
    ) -> Iterator[Any]:
        seed = request.config.getoption("--seed") if seed is None else seed
        options = options_from_args(
            _shape(request.config),
            time_limit=time_limit,
            seed=seed or 0,
            nemesis=kinds,
            nemesis_interval=interval,
            nemesis_duration=duration,
        )
        name = request.node.name.replace("/", "_").replace("[", "-").rstrip("]")
        run_dir = harness_store / "nemeses" / f"{name}-{len(started)}"
        (run_dir / "processes").mkdir(parents=True, exist_ok=True)
        ctx = RunContext(healthy_cluster, clients, options, run_dir, clients=clients)
        scheduled = ScheduledNemesis(options)
        started.append((scheduled, ctx))
        scheduled.start(ctx)
        try:
            yield scheduled.engine
        finally:
            scheduled.stop(ctx)

    yield run
    for scheduled, ctx in started:
        scheduled.stop(ctx)
        scheduled.heal(ctx)


@pytest.fixture
def run_report(request: pytest.FixtureRequest, record_property: Any) -> Callable[[Path], None]:
    """Call with a run's ``report.html``: JUnit XML gets a ``report`` property and
    pytest-html (when installed) a link, so a CI page leads straight to the evidence."""

    def link(report: Path) -> None:
        record_property("report", str(report))
        request.node.stash[_REPORT_KEY] = str(report)

    return link


_REPORT_KEY = pytest.StashKey[str]()


@pytest.fixture
def scenario(
    request: pytest.FixtureRequest, kafka_cluster: Any, harness_store: Path
) -> Callable[..., tuple[dict[str, Any], Any, Path]]:
    """``scenario("queue", "name", nemesis="pause", time_limit=20, txn=False)``: one run of a
    registered workload on the worker's cluster, with names of its own (the workload's
    ``isolate``), judged by the checkers; returns ``(verdict, RunResult, report.html)``.

    ``--time-limit`` and ``--seed`` override the scenario's own values; ``--nemesis`` the
    faults of a scenario that ``correct`` (a workload expected to come out valid), so the
    same suite can run longer or under other faults.
    """
    import uuid

    from harness.kafka.versions import KafkaVersion
    from harness.report import write_report
    from harness.run.arguments import options_from_args
    from harness.run.runner import run_on_shared
    from harness.run.workloads import get, security_problem

    def run(
        workload: str,
        name: str,
        *,
        nemesis: str = "none",
        time_limit: float = 30.0,
        interval: float = 4.0,
        duration: float = 6.0,
        correct: bool = True,
        **workload_options: Any,
    ) -> tuple[dict[str, Any], Any, Path]:
        config = request.config
        time_limit = config.getoption("--time-limit") or time_limit
        seed = config.getoption("--seed")
        seed = 1 if seed is None else seed
        if nemesis != "none" and correct:
            nemesis = config.getoption("--nemesis") or nemesis
        tag = f"{name}-{uuid.uuid4().hex[:6]}"
        spec = get(workload).spec
        chosen = {**spec.isolate(tag), "seed": seed, **workload_options}

        def build(fields: dict[str, Any]) -> Any:
            wopts = spec.options_type.from_dict(fields)
            reason = security_problem(config.getoption("--security"), workload, wopts)
            if reason is not None:
                pytest.skip(reason)
            need = spec.needs_kafka(wopts)
            version = config.getoption("--kafka-version")
            if need is not None and KafkaVersion(version) < KafkaVersion(need[0]):
                pytest.skip(f"{need[1]} needs Kafka {need[0]} or newer, not {version}")
            return options_from_args(
                _shape(config),
                workload=workload,
                workload_options=wopts,
                time_limit=time_limit,
                seed=seed,
                nemesis=nemesis,
                nemesis_interval=interval,
                nemesis_duration=duration,
            )

        options = _with_knobs(spec, chosen, config, build)
        needed = spec.broker_settings(options.workload_options)
        missing = {k: v for k, v in needed.items() if kafka_cluster.settings.get(k) != v}
        if missing:
            warnings.warn(
                f"scenario {name}: the worker's cluster was built without {missing}, which "
                "these options need (give them with --broker-config)",
                stacklevel=2,
            )
        run_dir = harness_store / "scenarios" / tag
        result = run_on_shared(kafka_cluster, options, run_dir)
        verdict = result.verdict or {}
        report = write_report(run_dir)
        request.getfixturevalue("run_report")(report)
        return verdict, result, report

    return run


def _with_knobs(
    spec: Any,
    chosen: dict[str, Any],
    config: pytest.Config,
    build: Callable[[dict[str, Any]], Any] | None = None,
) -> Any:
    """The workload's options with the suite's client knobs (``--client-config``,
    ``--group-protocol``, ``--txn-delay-ms``) over the scenario's own, where the workload has
    them, made (and validated) by ``build`` (default: the workload's options alone; the
    scenario builds its run's options); a scenario whose client refuses a knob its options
    could take is skipped, saying why."""
    build = build or spec.options_from_dict
    from common.errors import HarnessError
    from common.settings import parse_settings

    fields = {o.field for o in spec.cli}
    knobs: dict[str, Any] = {}
    client_config = parse_settings(config.getoption("--client-config"), "--client-config")
    if client_config and "client_config" in fields:
        knobs["client_config"] = {**chosen.get("client_config", {}), **client_config}
    for option, field in (
        ("--group-protocol", "group_protocol"),
        ("--txn-delay-ms", "txn_delay_ms"),
    ):
        if config.getoption(option) is not None and field in fields:
            knobs[field] = config.getoption(option)
    try:
        return build({**chosen, **knobs})
    except HarnessError as exc:
        if not knobs:
            raise
        spec.options_from_dict(chosen)  # the scenario alone is fine: the knobs are refused
        pytest.skip(f"this scenario's client cannot take the suite's knobs: {exc}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    path = item.stash.get(_REPORT_KEY, None)
    if path is None or report.when != "call":
        return
    try:
        from pytest_html import extras  # type: ignore[import-not-found]
    except ImportError:
        return
    report.extras = [*getattr(report, "extras", []), extras.url(Path(path).as_uri(), "report")]
