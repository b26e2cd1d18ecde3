"""One test run: a fresh cluster, a workload, nemeses, a stored history and a verdict.

``python -m harness run --workload NAME ...`` lands here, for every workload of the registry
(``harness.run.workloads``). A run writes everything into ``<store>/<test-name>/<timestamp>/``:
``config.json`` (the full configuration, with the workload's checker suites), one history
file per process in ``processes/``, the merged ``history.jsonl``, client logs in ``logs/``,
``summary.json`` (plain counts, and the seconds of each phase of the run), the cluster's
evidence (node logs, ``evidence/logdump.jsonl``), ``timeline.json`` (when each phase began) and
the checkers' ``results.json``, and points ``<store>/latest`` (and ``<store>/<test-name>/latest``)
at it.

The workload's driver (``workloads.<name>.driver``) runs its phases and says when the nemeses
act; the runner merges the history even when the run fails half-way, so whatever happened is
on disk for a human to read. Nemeses plug in through :func:`build_nemeses`
(``harness.run.nemesis``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.errors import HarnessError
from harness.kafka.security import CLIENT_IDENTITIES
from harness.run.drive import Drive
from harness.run.nemesis import ScheduledNemesis, fault_kinds
from harness.run.options import Nemesis, RunOptions
from harness.run.summary import record_phases
from harness.run.verdict import judge
from harness.run.workloads import complete
from harness.run.workloads import get as get_workload
from harness.storefiles import new_unique_dir
from harness.substrate.api import ClusterConfig
from harness.substrate.backends import open_cluster
from history import load_history, merge_histories
from workloads.processes import NotAuthorized

if TYPE_CHECKING:
    from checkers.judge import Judgement
    from harness.substrate.api import Cluster

log = logging.getLogger("harness.runner")


def build_nemeses(options: RunOptions) -> list[Nemesis]:
    """The run's fault injectors: one scheduled nemesis unless ``--nemesis none``."""
    # Validates the spec before a cluster exists.
    if options.replay is None and not fault_kinds(options, netns=True)[0]:
        return []
    return [ScheduledNemesis(options)]


@dataclass
class RunResult:
    run_dir: Path
    history: Path
    #: The driver's plain counts (the eos drain tally), None for a workload without one.
    summary: dict[str, Any] | None
    #: Whether the driver's final phase (drain, final reads) completed.
    drained: bool
    stats: dict[str, Any]
    #: The tally in one line, printed beside the verdict.
    tally_line: str | None = None
    #: What the summary and the report say beside the verdict (tally, throughput).
    lines: list[str] = field(default_factory=list)
    #: The checkers' verdict (``results.json``); set by :func:`run` once the cluster's
    #: evidence is on disk, or by a caller of :func:`execute` via ``harness.run.verdict.judge``.
    verdict: dict[str, Any] | None = None


# --- running ---------------------------------------------------------------------------


def new_run_dir(store: Path, test_name: str) -> Path:
    """``store/<test>/<timestamp>``, unique even for two runs within one second."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    return new_unique_dir(store.resolve() / test_name, stamp, "run directory")


def _link_latest(link: Path, target: Path) -> None:
    tmp = link.with_name(f".{link.name}.{os.getpid()}")
    try:
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(os.path.relpath(target, link.parent))
        tmp.replace(link)
    except OSError as exc:
        log.warning("could not update %s: %s", link, exc)


def write_config(run_dir: Path, options: RunOptions, extra: dict[str, Any]) -> None:
    config = {
        **options.to_dict(),
        "checker_suites": list(get_workload(options.workload).spec.checker_suites),
        **extra,
        "argv": sys.argv,
        "python": sys.version.split()[0],
        "host": platform.node(),
        "written_wall": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (run_dir / "config.json").write_text(json.dumps(config, indent=2, default=str) + "\n")


def _grant_acls(cluster: Cluster, options: RunOptions) -> None:
    """On a secured cluster, the ACLs the workload's clients need (but those of the
    resource ``--withhold-acl`` names)."""
    # A stand-in cluster of a plugin user's (docs/plugin.md) may have no security at all.
    if getattr(cluster, "security", None) is None:
        return
    acls = get_workload(options.workload).spec.acls(options.workload_options)
    given = [a for a in acls if a.resource != options.withhold_acl]
    cluster.grant(f"User:{CLIENT_IDENTITIES[0]}", given)


#: The error a client gets for want of an ACL on each kind of resource.
_REFUSALS = {
    "TOPIC_AUTHORIZATION_FAILED": "topic",
    "GROUP_AUTHORIZATION_FAILED": "group",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": "transactional_id",
    "CLUSTER_AUTHORIZATION_FAILED": "cluster",
}


def refusal_line(exc: NotAuthorized, options: RunOptions) -> str:
    """The one line of a run whose client the authorizer refused: the error, and the ACLs of
    the workload on that kind of resource the client lacked."""
    kind = _REFUSALS.get(exc.error.removeprefix("Java:").split(".")[-1])
    acls = get_workload(options.workload).spec.acls(options.workload_options)
    needed = " and ".join(a.text() for a in acls if a.resource == kind)
    principal = f"User:{CLIENT_IDENTITIES[0]}"
    if not needed:
        return f"process {exc.process} was refused by the cluster ({exc.error}) as {principal}"
    why = (
        f"withheld by --withhold-acl {kind}"
        if options.withhold_acl == kind
        else "the harness granted it, so the client asked for more than its workload's ACLs"
    )
    return (
        f"process {exc.process} was refused by the cluster ({exc.error}): {principal} "
        f"lacks {needed} ({why})"
    )


def execute(
    cluster: Cluster,
    options: RunOptions,
    run_dir: Path,
    nemeses: list[Nemesis] | None = None,
    *,
    load_over: Callable[[], None] | None = None,
    mark: Callable[[str], None] | None = None,
) -> RunResult:
    """Run the workload on an already started cluster; the history lands in ``run_dir``.

    Tests call this with their session cluster (and unique topic names); ``run`` calls it
    with a fresh cluster whose evidence is stored in the same directory. ``load_over`` and
    ``mark`` (the run's :meth:`Timeline.mark`): see :class:`Drive`.
    """
    options = complete(options)
    workload = get_workload(options.workload)
    run_dir.mkdir(parents=True, exist_ok=True)
    if not (run_dir / "config.json").exists():
        write_config(run_dir, options, {"cluster_run_id": cluster.run_id})
    history_path = run_dir / "history.jsonl"
    _grant_acls(cluster, options)
    completed = False
    try:
        drive = Drive(cluster, options, run_dir, list(nemeses or []), load_over, mark)
        try:
            outcome = workload.drive(drive)
        except NotAuthorized as exc:
            raise HarnessError(refusal_line(exc, options)) from None
        completed = True
    finally:
        try:
            paths = sorted(run_dir.glob(workload.spec.history_files))
            merge_histories(paths, history_path, meta=options.to_dict())
        except Exception as exc:
            if completed:
                raise
            # Do not mask the failure that ended the run; the per-process files remain.
            log.warning("merging the history of a failed run failed: %s", exc)
    summary = workload.summarize(load_history(history_path))
    stats = {**summary.stats, **outcome.stats}
    (run_dir / "summary.json").write_text(
        json.dumps(
            {
                "summary": summary.tally,
                "stats": stats,
                "drained": outcome.finished,
                "lines": summary.lines,
            },
            indent=2,
        )
        + "\n"
    )
    return RunResult(
        run_dir, history_path, summary.tally, outcome.finished, stats, summary.line, summary.lines
    )


def run_on_shared(cluster: Cluster, options: RunOptions, run_dir: Path) -> RunResult:
    """One run on a cluster that outlives it (a campaign's, a client-check's, a test worker's):
    its own faults (healed when it ends), then its verdict. Its names must be its own
    (the workload spec's ``isolate``); no log dump, the cluster is still up."""
    result = execute(cluster, options, run_dir, build_nemeses(options))
    result.verdict = judge(run_dir)
    return result


def run(
    options: RunOptions,
    nemeses: list[Nemesis] | None = None,
    run_dir: Path | None = None,
    on_phase: Callable[[str], None] = lambda phase: None,
    *,
    verdict: bool = True,
) -> RunResult:
    """One complete test on a fresh cluster whose evidence goes into the run directory,
    judged by the checkers once the cluster is gone (its log dumps are part of the evidence).

    ``verdict=False`` records the run and leaves judging it to the caller, who holds a warm
    Spark session for many runs (the matrix judges its cells' runs so): no JVM is started here.
    """
    options = complete(options)
    nemeses = build_nemeses(options) if nemeses is None else nemeses
    run_dir = run_dir or start_run_dir(options)
    cluster_config = cluster_config_of(options, run_dir)
    write_config(run_dir, options, {"cluster": _jsonable(asdict(cluster_config))})
    timeline = Timeline(run_dir / "timeline.json", on_phase)
    if not verdict:
        timeline.phase("starting the cluster")
        result, _ = _run_on_cluster(
            options, nemeses, run_dir, cluster_config, timeline, prepare=False
        )
        timeline.phase("recorded")
        record_phases(run_dir)
        return result
    from checkers.warm import prewarm

    # Spark starts and warms up while the load runs once the history grows big enough to be
    # judged on it; the history is converted for the checks while the cluster stops and its
    # logs are dumped.
    warm = prewarm(needed=_spark_needed(options, run_dir))
    try:
        timeline.phase("starting the cluster")
        result, judgement = _run_on_cluster(
            options, nemeses, run_dir, cluster_config, timeline, load_over=warm.stop
        )
        timeline.phase("checking")
        warm.finish()
        result.verdict = judge(run_dir, judgement=judgement)
        if judgement is not None:
            timeline.checks = dict(judgement.seconds)
        timeline.phase("judged")
    finally:
        warm.close()
    record_phases(run_dir)
    return result


def _spark_needed(options: RunOptions, run_dir: Path) -> Callable[[], bool]:
    """Whether the run's verdict will want Spark: a Spark cluster was asked for, or the
    history already holds half the input the Python engines take (its log dump comes on
    top, so the warm-up starts early enough for a run that ends above the bound)."""
    from checkers.judge import PYTHON_MAX_BYTES
    from checkers.spark import ENV_MASTER

    pattern = get_workload(options.workload).spec.history_files

    def needed() -> bool:
        if os.environ.get(ENV_MASTER):
            return True
        size = 0
        for path in run_dir.glob(pattern):
            with contextlib.suppress(OSError):
                size += path.stat().st_size
        return size >= PYTHON_MAX_BYTES // 2

    return needed


class Timeline:
    """When each phase of a run began (wall clock), kept in ``timeline.json`` as it goes:
    where a run's time went (``summary.json``'s ``phases`` are derived from it, see
    :func:`harness.run.summary.phase_seconds`), and what ``bench/verdict_latency.py`` measures.

    ``phases`` are the ones the progress line shows (``on_phase``); ``marks`` are moments
    inside the running phase that it does not (the load, the heal, the heal's end, told by
    :class:`Drive`), kept apart so the phases' list stays what it was; ``checks`` are the
    seconds each checker suite ran.
    """

    def __init__(self, path: Path, on_phase: Callable[[str], None]) -> None:
        self.path = path
        self.on_phase = on_phase
        self.phases: list[dict[str, Any]] = []
        self.marks: list[dict[str, Any]] = []
        self.checks: dict[str, float] = {}

    def phase(self, name: str) -> None:
        self.phases.append({"phase": name, "wall": _wall_now()})
        self._write()
        if name != "judged":
            self.on_phase(name)

    def mark(self, name: str) -> None:
        """A moment inside a phase, recorded without telling the progress line."""
        self.marks.append({"mark": name, "wall": _wall_now()})
        self._write()

    def _write(self) -> None:
        out: dict[str, Any] = {"phases": self.phases}
        if self.marks:
            out["marks"] = self.marks
        if self.checks:
            out["checks"] = self.checks
        self.path.write_text(json.dumps(out, indent=1) + "\n")


def _wall_now() -> str:
    """Now, as the history's ``wall`` fields are written (UTC, microseconds)."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"


def _run_on_cluster(
    options: RunOptions,
    nemeses: list[Nemesis],
    run_dir: Path,
    cluster_config: ClusterConfig,
    timeline: Timeline,
    *,
    prepare: bool = True,
    load_over: Callable[[], None] | None = None,
) -> tuple[RunResult, Judgement | None]:
    """The run on a fresh cluster, and (``prepare``) its judgement, prepared while the
    cluster stops; ``load_over``: see :class:`Drive`."""
    from checkers.judge import Judgement

    with open_cluster(cluster_config, options.backend) as cluster:
        timeline.phase("running")
        write_config(
            run_dir,
            options,
            {
                "cluster": _jsonable(asdict(cluster_config)),
                "run_id": cluster.run_id,
                "slot": cluster.slot.number if cluster.slot else None,
                "kafka_version_resolved": str(cluster.install.version) if cluster.install else None,
                "network_mode": (
                    ("netns" if cluster.uses_netns else "loopback")
                    if cluster.backend == "process"
                    else cluster.backend
                ),
                "broker_settings_effective": cluster.settings,
                "bootstrap": cluster.bootstrap,
            },
        )
        result = execute(
            cluster, options, run_dir, nemeses, load_over=load_over, mark=timeline.mark
        )
        timeline.phase("stopping the cluster, dumping its logs")
        judgement = None
        if prepare:
            judgement = Judgement(run_dir)
            judgement.prepare()
    return result, judgement


def cluster_config_of(options: RunOptions, store: Path | None) -> ClusterConfig:
    """The cluster a run of ``options`` gets: its shape, its version, and the broker settings
    its workload needs (``WorkloadSpec.broker_settings``) under the run's ``--broker-config``."""
    wopts = options.workload_options
    needed = get_workload(options.workload).spec.broker_settings(wopts) if wopts else {}
    return ClusterConfig(
        nodes=options.nodes,
        kafka_version=options.kafka_version,
        transaction_version=options.transaction_version,
        broker_settings={**needed, **options.broker_settings},
        replication_factor=options.replication_factor,
        min_insync_replicas=options.min_insync_replicas,
        broker_patch=options.broker_patch,
        security=options.security,
        store=store,
        network=options.network,
        hosts=options.hosts,
        accept_new_host_keys=options.accept_new_host_keys,
    )


def start_run_dir(options: RunOptions) -> Path:
    """A new run directory, pointed at by ``<store>/latest`` and ``<store>/<test>/latest``."""
    store = Path(options.store)
    run_dir = new_run_dir(store, options.test_name)
    _link_latest(store.resolve() / "latest", run_dir)
    _link_latest(run_dir.parent / "latest", run_dir)
    return run_dir


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    return {k: str(v) if isinstance(v, Path) else v for k, v in d.items()}
