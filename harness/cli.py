"""``python -m harness``: install Kafka, bring clusters up, reap leftovers.

Every user-facing failure is a :class:`HarnessError`, printed as one line with exit status 2,
and so is a usage error argparse finds (``OneLineParser``); only a bug shows a traceback.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import signal
import sys
import time
from pathlib import Path

from common.errors import HarnessError, OneLineParser
from harness import __version__
from harness.kafka.versions import DEFAULT_KAFKA_VERSION

log = logging.getLogger("harness.cli")


def _cmd_install(args: argparse.Namespace) -> int:
    from harness import prepare

    t0 = time.monotonic()
    inst = prepare.main_job(args.kafka_version)
    print(
        f"Kafka {inst.version}: {inst.libs_dir} ({len(list(inst.libs_dir.glob('*.jar')))} jars); "
        f"toxiproxy: {inst.toxiproxy_bin}; {time.monotonic() - t0:.1f}s"
    )
    if args.all:
        t0 = time.monotonic()
        warnings = prepare.the_rest()
        print(f"the rest: {len(warnings)} part(s) not built here; {time.monotonic() - t0:.1f}s")
    return 0


def _cluster_config(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from harness.substrate.api import ClusterConfig, shape_from_args

    config = ClusterConfig(
        **shape_from_args(args),
        kafka_version=args.kafka_version,
        transaction_version=args.transaction_version,
        store=Path(args.store) if args.store else None,
        base_port=args.base_port,
        network=args.network,
        hosts=args.hosts,
        accept_new_host_keys=args.accept_new_host_keys,
    )
    config.validate()
    return config


def _cmd_cluster(args: argparse.Namespace) -> int:
    """Bring a cluster up, print how to reach it, hold it, tear it down."""
    from harness.substrate.backends import open_cluster

    with open_cluster(_cluster_config(args), args.backend) as cluster:
        network = cluster.backend  # containers' or machines' own networks
        if network == "process":
            network = "netns" if cluster.uses_netns else "loopback"
        info = {
            "run_id": cluster.run_id,
            "backend": cluster.backend,
            "kafka_version": str(cluster.install.version) if cluster.install else None,
            "bootstrap": cluster.bootstrap,
            "internal_bootstrap": cluster.internal_bootstrap,
            "network": network,
            "store": str(cluster.dir),
            "ready_seconds": round(cluster.timings["ready"], 2),
        }
        if cluster.security is not None:  # how a client logs in: files, never a secret
            info["security"] = {"mode": cluster.security.mode, "client": cluster.client_security}
        print(json.dumps(info), flush=True)
        if args.hold:
            deadline = time.monotonic() + args.hold
            while time.monotonic() < deadline:
                time.sleep(min(1.0, deadline - time.monotonic()))
    print(json.dumps({"teardown_seconds": round(cluster.timings["teardown"], 2)}))
    return 0


def _cmd_reap(args: argparse.Namespace) -> int:
    from harness.substrate.runstate import reap_all

    if args.hosts:
        from harness.substrate.ssh.cluster import reap_hosts

        ssh = reap_hosts(args.hosts, args.everyone, args.accept_new_host_keys)
        print(json.dumps({**reap_all(), "ssh": ssh}))
        return 0
    from harness.substrate.docker.engine import reap_docker

    print(json.dumps({**reap_all(), "docker": reap_docker()}, default=str))
    return 0


def _cmd_spark_lab(args: argparse.Namespace) -> int:
    from harness.substrate.sparklab import lab_down, lab_up

    if args.action == "up":
        url = lab_up(Path(args.store), args.workers)
        print(json.dumps({"master": url, "store": str(Path(args.store).resolve())}))
    else:
        print(json.dumps({"removed_containers": lab_down()}))
    return 0


def _cmd_ssh_lab(args: argparse.Namespace) -> int:
    from harness.substrate.ssh.lab import lab_down, lab_up

    if args.action == "up":
        if args.count is None:
            raise HarnessError("ssh-lab up needs the number of machines: ssh-lab up 3 --hosts F")
        hosts = lab_up(args.count, Path(args.hosts))
        print(
            json.dumps(
                {
                    "hosts_file": str(Path(args.hosts).resolve()),
                    "machines": [h.label for h in hosts],
                }
            )
        )
    else:
        print(json.dumps({"removed_containers": lab_down(Path(args.hosts))}))
    return 0


def _cmd_images(args: argparse.Namespace) -> int:
    """Build (if needed) the Docker backend's runtime image and print, as shell assignments,
    what ``docker/compose.yaml`` mounts: the image, the Kafka jars, toxiproxy's server."""
    import shlex

    from harness.kafka.install import ensure_installed
    from harness.substrate.docker.engine import connect_engine
    from harness.substrate.docker.images import ensure_runtime_image

    inst = ensure_installed(args.kafka_version)
    image = ensure_runtime_image(connect_engine())
    for key, value in (
        ("KH_RUNTIME_IMAGE", image),
        ("KH_KAFKA_LIBS", str(inst.libs_dir)),
        ("KH_TOXIPROXY_BIN", str(inst.toxiproxy_bin)),
    ):
        print(f"export {key}={shlex.quote(value)}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    """``python -m harness run``: one test with live progress, then the checkers' verdict
    as a summary table and as the exit status (0 valid, 1 invalid, 2 cannot judge). The
    report is drawn here, above the run room, because the report reads the run's files and
    the workloads' declarations, never the other way round."""
    from checkers.spark import use_master
    from harness.report import write_report
    from harness.run.arguments import options_from_args
    from harness.run.progress import LiveProgress
    from harness.run.runner import run, start_run_dir
    from harness.run.summary import print_summary, record_report
    from harness.run.verdict import exit_status
    from harness.run.workloads import get

    use_master(args.spark_master)
    options = options_from_args(args)
    t0 = time.monotonic()
    run_dir = start_run_dir(options)
    print(f"run: {run_dir} (seed {options.seed})", flush=True)
    started = get(options.workload).spec.load_started
    with LiveProgress(run_dir, options.time_limit, started) as progress:
        result = run(
            options, run_dir=run_dir, on_phase=progress.set_phase, verdict=not args.no_verdict
        )
    if args.no_verdict:
        print(f"recorded, not judged: {run_dir} ({result.tally_line})", flush=True)
        return 0
    verdict = result.verdict or {"valid": "unknown", "anomalies": {}}
    lines = list(result.lines)
    if not result.drained:
        lines.append("the final phase (drain, final reads) did not complete")
    report: Path | None = None
    drawn = time.monotonic()
    try:
        report = write_report(run_dir)
    except Exception as exc:  # a failure to draw must not hide the run's outcome
        log.error("writing the report of %s failed: %s", run_dir, exc)
    else:
        record_report(run_dir, time.monotonic() - drawn)
    print_summary(
        verdict,
        run_dir,
        report,
        lines=lines,
        seconds=time.monotonic() - t0,
    )
    return exit_status(verdict)


def _cmd_versions(args: argparse.Namespace) -> int:
    """Released Kafka versions on Maven Central, newest first; installed and new marked."""
    from harness.kafka.install import kafka_home
    from harness.kafka.versions import released_versions, versions_report

    available = released_versions()
    installed = {v for v in available if (kafka_home(v) / "INSTALLED.json").exists()}
    seen_file = Path(args.store) / "versions-seen.json"
    seen = set(json.loads(seen_file.read_text())) if seen_file.exists() else None
    rows = versions_report(available, installed, seen)
    if args.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            marks = " ".join(
                m for m, on in (("installed", r["installed"]), ("NEW", r["new"])) if on
            )
            print(f"{r['version']:<10} {marks}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from harness.report import write_report

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise HarnessError(f"no run directory at {run_dir}")
    print(write_report(run_dir))
    return 0


def _add_cluster_args(p: argparse.ArgumentParser) -> None:
    from harness.substrate.api import add_shape_arguments

    p.add_argument("--kafka-version", default=DEFAULT_KAFKA_VERSION)
    add_shape_arguments(p)
    p.add_argument("--transaction-version", type=int, choices=[0, 1, 2], default=None)
    p.add_argument("--store", default=None, help="evidence directory (default store/clusters/ID)")
    p.add_argument("--base-port", type=int, default=None, help="toxiproxy API port; proxies follow")
    p.add_argument("--network", choices=["auto", "netns", "loopback"], default="auto")


def build_parser() -> argparse.ArgumentParser:
    # Usage errors are one line and exit status 2, like every other bad input.
    parser = OneLineParser(
        prog="python -m harness",
        description="Exactly-once tests of real Kafka clusters: install Kafka, run a workload "
        "under faults and judge its history, many runs (campaign, matrix), reports. A bad "
        "input is one line on stderr and exit status 2; a run's exit status is its verdict "
        "(0 valid, 1 invalid, 2 could not judge).",
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "install",
        help="install what the main job needs (a Kafka version, toxiproxy, the Java clients)",
    )
    p.add_argument("--kafka-version", default=DEFAULT_KAFKA_VERSION)
    p.add_argument(
        "--all",
        action="store_true",
        help="also build what other commands and the tests build on first use: the Go and "
        "Node clients, the Streams application, the tests' other Kafka versions, the Docker "
        "images (when an engine answers)",
    )
    p.set_defaults(func=_cmd_install)

    p = sub.add_parser("cluster", help="start a cluster, print its addresses, hold, tear down")
    _add_cluster_args(p)
    p.add_argument("--hold", type=float, default=0.0, help="seconds to keep it up")
    from harness.substrate.backends import add_backend_argument

    add_backend_argument(p)
    p.set_defaults(func=_cmd_cluster)

    p = sub.add_parser("versions", help="list Kafka versions on Maven Central")
    p.add_argument("--store", default="store", help="where matrix runs record versions seen")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_versions)

    from harness.nightly.matrix import add_matrix_arguments, matrix_command
    from harness.nightly.trends import add_trends_arguments, trends_command

    p = sub.add_parser("matrix", help="run a set of scenarios against several Kafka versions")
    add_matrix_arguments(p)
    p.set_defaults(func=matrix_command)

    p = sub.add_parser("trends", help="trends over stored matrix runs (on Spark)")
    add_trends_arguments(p)
    p.set_defaults(func=trends_command)

    p = sub.add_parser("report", help="(re)write a stored run's report.html")
    p.add_argument("run_dir")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("images", help="build the Docker backend's image; print compose's env")
    p.add_argument("--kafka-version", default=DEFAULT_KAFKA_VERSION, metavar="V")
    p.set_defaults(func=_cmd_images)

    p = sub.add_parser("reap", help="clean up after harness runs that died")
    p.add_argument(
        "--hosts",
        metavar="FILE",
        help="clean the SSH backend's machines instead of the Docker engine: every run this "
        "machine started there and no live harness holds",
    )
    p.add_argument(
        "--everyone",
        action="store_true",
        help="with --hosts: also the runs other control machines started there",
    )
    from harness.substrate.ssh.hosts import add_host_key_argument

    add_host_key_argument(p.add_argument)
    p.set_defaults(func=_cmd_reap)

    p = sub.add_parser(
        "spark-lab", help="a standalone Spark cluster in local Docker containers, to judge on"
    )
    p.add_argument("action", choices=("up", "down"))
    p.add_argument(
        "--store",
        default="store",
        metavar="DIR",
        help="up: the store the workers see at the same path (where the runs to judge are)",
    )
    p.add_argument("--workers", type=int, default=2, help="up: how many workers")
    p.set_defaults(func=_cmd_spark_lab)

    p = sub.add_parser(
        "ssh-lab", help="machines for --backend ssh: SSH servers in local Docker containers"
    )
    p.add_argument("action", choices=("up", "down"))
    p.add_argument("count", nargs="?", type=int, help="up: how many machines")
    p.add_argument("--hosts", required=True, metavar="FILE", help="the hosts file to write/read")
    p.set_defaults(func=_cmd_ssh_lab)

    from harness.report.serve import add_serve_arguments, index_command, serve_command

    p = sub.add_parser("serve", help="serve a store's runs index and reports over HTTP")
    add_serve_arguments(p)
    p.set_defaults(func=serve_command)

    p = sub.add_parser("index", help="write STORE/index.html: every run, verdict, report link")
    p.add_argument("--store", default="store", metavar="DIR")
    p.set_defaults(func=index_command)

    from harness.nightly.campaign import add_arguments as add_campaign_arguments
    from harness.nightly.campaign import campaign_command

    p = sub.add_parser("campaign", help="many seeded runs: how often is each verdict right?")
    add_campaign_arguments(p)
    p.set_defaults(func=campaign_command)

    from harness.clientcheck import add_arguments as add_client_check_arguments
    from harness.clientcheck import client_check_command

    p = sub.add_parser(
        "client-check", help="short real runs of a client, its histories held to the contract"
    )
    add_client_check_arguments(p)
    p.set_defaults(func=client_check_command)

    p = sub.add_parser("run", help="run one test on a fresh cluster and store its history")
    from harness.run.arguments import add_run_arguments
    from harness.run.workloads import add_workload_arguments
    from harness.substrate.api import add_shape_arguments

    add_run_arguments(p)
    p.add_argument(
        "--replay",
        default=None,
        metavar="SCHEDULE.json",
        help="replay the faults of a saved schedule.json",
    )
    p.add_argument("--network", choices=["auto", "netns", "loopback"], default="auto")
    add_shape_arguments(p)
    from common.acls import ACL_RESOURCES

    p.add_argument(
        "--withhold-acl",
        choices=ACL_RESOURCES,
        default=None,
        help="with --security: leave out the clients' ACLs on this kind of resource, to see "
        "how a client fails that lacks them (the run stops with status 2 and names the ACL)",
    )
    add_backend_argument(p)
    add_workload_arguments(p)
    from checkers.spark import add_master_argument

    add_master_argument(p)
    p.add_argument(
        "--no-verdict",
        action="store_true",
        help="record the run and leave judging it to the caller (exit 0 once recorded; "
        "the matrix judges its cells so, in one warm Spark)",
    )
    p.set_defaults(func=_cmd_run)
    return parser


def main(argv: list[str] | None = None) -> int:
    # A crash inside a native client library must leave a Python stack behind, not silence.
    faulthandler.enable()
    # A background job of a non-interactive shell starts with SIGINT ignored, and Python then
    # leaves it ignored: an interrupt would not tear the cluster down. Every harness command
    # must stop cleanly on SIGINT, however it was started.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted; cleaned up", file=sys.stderr)
        return 130
