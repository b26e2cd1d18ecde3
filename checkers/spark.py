"""One SparkSession for the checkers: embedded by default, a real cluster on request.

Why this module exists: checkers must scale to histories and log dumps of tens of millions of
records, so they are written against Spark DataFrames; but a checker run is a short CLI
command, so the session must start quietly, use little memory, and leave no JVM behind.

* Master: the ``master`` argument, else ``$KAFKA_HARNESS_SPARK_MASTER``, else ``local[*]``.
* Embedded defaults: no UI, no Hive, few shuffle partitions, ``spark.driver.memory`` from
  ``$KAFKA_HARNESS_SPARK_DRIVER_MEMORY`` (default: a quarter of the machine's memory, 2g to
  8g), UTC session time zone. The JVM's own output goes to a log file
  (``$KAFKA_HARNESS_SPARK_LOG`` or a file in the temp dir) so the CLI's stderr stays one line
  on errors.
* :func:`stop_spark` stops the session *and* ends the JVM process pyspark started. Plain
  ``SparkSession.stop()`` leaves that JVM running until the Python process exits.
* Every failure to start or use Spark is raised as :class:`SparkUnavailable`, which the
  checkers turn into a ``{"valid": "unknown", "error": ...}`` result.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ENV_MASTER = "KAFKA_HARNESS_SPARK_MASTER"
ENV_DRIVER_MEMORY = "KAFKA_HARNESS_SPARK_DRIVER_MEMORY"
ENV_LOG = "KAFKA_HARNESS_SPARK_LOG"
#: Where checkers put Parquet they cannot keep in the run directory (a read-only store). On a
#: Spark cluster the executors read it: it must be on storage they all see at the same path.
ENV_SCRATCH = "KAFKA_HARNESS_SPARK_SCRATCH"
DEFAULT_MASTER = "local[*]"
APP_NAME = "kafka-eos-checkers"

_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n%ex
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
"""

_lock = threading.RLock()
_owned: dict[str, Any] = {}  # what start_spark launched: session, gateway process, log path
#: JVMs :func:`start_spark` launched in this process: what "Spark's start-up paid once per
#: campaign / matrix" is measured by.
jvm_launches = 0


class SparkUnavailable(RuntimeError):
    """Spark could not be started or failed while checking; the message is one line."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


def resolve_master(master: str | None = None) -> str:
    """The master URL to use: argument, environment, or the embedded default."""
    return master or os.environ.get(ENV_MASTER) or DEFAULT_MASTER


def default_driver_memory() -> str:
    """A quarter of physical memory, between 2g and 8g: the embedded JVM is driver and
    executor at once, and the checks of a big run are memory-bound before they are CPU-bound."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return "2g"
    return f"{max(2, min(8, total // 4 >> 30))}g"


def _conf_pairs(master: str, extra: dict[str, str] | None) -> dict[str, str]:
    local = master.startswith("local")
    conf = {
        "spark.master": master,
        "spark.app.name": APP_NAME,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "8" if local else "64",
        "spark.default.parallelism": "8" if local else "64",
        "spark.sql.adaptive.enabled": "true",
        # Checkers partition by (kind, topic, partition) once; let joins and windows on
        # finer keys reuse that partitioning instead of shuffling again.
        "spark.sql.requireAllClusterKeysForCoPartition": "false",
        "spark.driver.memory": os.environ.get(ENV_DRIVER_MEMORY) or default_driver_memory(),
        "spark.sql.execution.arrow.pyspark.enabled": "false",
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        "spark.driver.bindAddress": "127.0.0.1" if local else "0.0.0.0",
    }
    if local:
        conf["spark.driver.host"] = "127.0.0.1"
    else:
        # The executors connect back to the driver: at the address this machine reaches the
        # master from (a default hostname may resolve to loopback).
        host = _address_towards(master)
        if host:
            conf["spark.driver.host"] = host
    conf.update(extra or {})
    return conf


def add_master_argument(p: Any) -> None:
    """``--spark-master URL`` of the commands that judge in their own process (run, campaign,
    matrix); :func:`use_master` applies it."""
    p.add_argument(
        "--spark-master",
        metavar="URL",
        default=None,
        help=f"judge on this Spark cluster (default: ${ENV_MASTER}, else embedded "
        f"{DEFAULT_MASTER}); the store must be on storage its workers see at the same path",
    )


def use_master(url: str | None) -> None:
    """Make ``url`` the master of every session this process starts (through the
    environment, which :func:`resolve_master` reads, so nested callers need no argument)."""
    if url:
        os.environ[ENV_MASTER] = url


def _address_towards(master: str) -> str | None:
    """This machine's address on the route to ``spark://host:port`` (no packet is sent)."""
    import socket
    from urllib.parse import urlparse

    url = urlparse(master.split(",")[0])
    if url.scheme != "spark" or not url.hostname:
        return None
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((url.hostname, url.port or 7077))
            return str(s.getsockname()[0])
    except OSError:
        return None


def scratch_dir(prefix: str) -> Path:
    """A new scratch directory for Parquet the checks read (removed by its caller), under
    ``KAFKA_HARNESS_SPARK_SCRATCH`` when set, else the system's temporary directory."""
    root = os.environ.get(ENV_SCRATCH)
    if root:
        Path(root).mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=root or None))


def _log_path() -> Path:
    env = os.environ.get(ENV_LOG)
    if env:
        return Path(env)
    return Path(tempfile.gettempdir()) / f"kafka-harness-spark-{os.getpid()}.log"


def _log4j_file() -> Path:
    d = Path(tempfile.gettempdir()) / f"kafka-harness-spark-conf-{os.getuid()}"
    d.mkdir(exist_ok=True)
    p = d / "log4j2.properties"
    if not p.exists() or p.read_text() != _LOG4J2:
        tmp = p.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J2)
        tmp.replace(p)
    return p


def active_session() -> SparkSession | None:
    """The SparkSession already running in this process, if any."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return None
    s = SparkSession.getActiveSession()
    if s is None:
        s = SparkSession._instantiatedSession
    if s is not None and getattr(s.sparkContext, "_jsc", None) is None:
        return None
    return s


def start_spark(master: str | None = None, conf: dict[str, str] | None = None) -> SparkSession:
    """Return the process's SparkSession, starting one (and its JVM) if there is none.

    A session that is already running is reused as it is; asking for a different master than
    the running one is an error rather than a silent surprise.
    """
    wanted = resolve_master(master)
    with _lock:
        running = active_session()
        if running is not None:
            have = running.sparkContext.master
            if master is not None and have != wanted:
                raise SparkUnavailable(
                    f"a Spark session with master {have} is already running in this process; "
                    f"cannot switch to {wanted}"
                )
            return running
        try:
            from pyspark import SparkConf, SparkContext
            from pyspark.java_gateway import launch_gateway
            from pyspark.sql import SparkSession
        except ImportError as e:
            raise SparkUnavailable(
                f"pyspark is not installed ({e}); install the 'spark' extra"
            ) from None
        pairs = _conf_pairs(wanted, conf)
        log4j = _log4j_file()
        pairs["spark.driver.extraJavaOptions"] = (
            f"-Dlog4j2.configurationFile=file:{log4j} "
            + pairs.get("spark.driver.extraJavaOptions", "")
        ).strip()
        sconf = SparkConf(loadDefaults=False)
        for k, v in pairs.items():
            sconf.set(k, v)
        log = _log_path()
        log_fh = open(log, "ab")  # noqa: SIM115 - the JVM child keeps writing to it
        log_start = log_fh.tell()
        if wanted.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        gateway = None
        try:
            gateway = launch_gateway(sconf, popen_kwargs={"stdout": log_fh, "stderr": log_fh})
            sc = SparkContext(conf=sconf, gateway=gateway)
            session = SparkSession(sc)
            sc.setLogLevel("ERROR")
        except Exception as e:
            _end_gateway(gateway)
            SparkContext._gateway = None
            SparkContext._jvm = None
            why = _jvm_error(log, log_start) or _first_line(e)
            raise SparkUnavailable(
                f"cannot start Spark (master {wanted}): {why} (JVM log: {log})"
            ) from None
        finally:
            log_fh.close()
        _owned.update(session=session, gateway=gateway, log=log)
        global jvm_launches
        jvm_launches += 1
        return session


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("at ", "JVM stacktrace")):
            return f"{type(e).__name__}: {line}"[:400]
    return type(e).__name__


def _jvm_error(log: Path, start: int) -> str | None:
    """The first exception line the JVM wrote to its log since ``start``, if any."""
    try:
        with open(log, "rb") as fh:
            fh.seek(start)
            text = fh.read(1 << 20).decode("utf-8", "replace")
    except OSError:
        return None
    for line in text.splitlines():
        if "Exception" in line or line.startswith("Error"):
            return line.strip()[:400]
    return None


def spark_error(e: BaseException) -> SparkUnavailable:
    """Wrap any exception raised by Spark into a one-line :class:`SparkUnavailable`."""
    if isinstance(e, SparkUnavailable):
        return e
    log = _owned.get("log")
    where = f" (JVM log: {log})" if log else ""
    return SparkUnavailable(f"Spark failed: {_first_line(e)}{where}")


def _end_gateway(gateway: Any, timeout: float = 20.0) -> None:
    """Close the py4j gateway and wait for the JVM process to exit (killing it if it won't)."""
    if gateway is None:
        return
    with contextlib.suppress(Exception):
        gateway.shutdown()
    proc = getattr(gateway, "proc", None)
    if proc is None:
        return
    with contextlib.suppress(Exception):
        if proc.stdin is not None:
            proc.stdin.close()  # the JVM exits when its stdin reaches EOF
    try:
        proc.wait(timeout=timeout)
    except Exception:
        with contextlib.suppress(Exception):
            proc.terminate()
        try:
            proc.wait(timeout=5)
        except Exception:
            with contextlib.suppress(Exception):
                proc.kill()
            with contextlib.suppress(Exception):
                proc.wait(timeout=5)


def set_conf(spark: SparkSession, conf: dict[str, str]) -> dict[str, str | None]:
    """Set a session's SQL settings for one check; the values they replace, for
    :func:`restore_conf` (each check runs in a session of its own, so nothing else sees them)."""
    saved = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    return saved


def restore_conf(spark: SparkSession, saved: dict[str, str | None]) -> None:
    """Put back what :func:`set_conf` replaced (unset what was unset)."""
    for k, v in saved.items():
        if v is None:
            spark.conf.unset(k)
        else:
            spark.conf.set(k, v)


def jvm_pid() -> int | None:
    """Process id of the JVM this module started (None if it did not start one)."""
    gw = _owned.get("gateway")
    proc = getattr(gw, "proc", None)
    return None if proc is None else int(proc.pid)


def stop_spark(*, kill: bool = False) -> None:
    """Stop the session this module started and make sure its JVM process is gone.

    A session started by someone else (e.g. ``pyspark`` shell) is left alone. ``kill``: the
    JVM is terminated without asking the session to stop. Why: a job that a cancellation left
    hung (seen with the warm-up's cancelled checks) keeps the session from answering, and
    ``stop()`` could wait on it for ever.
    """
    with _lock:
        session = _owned.pop("session", None)
        gateway = _owned.pop("gateway", None)
        _owned.pop("log", None)
        if session is None:
            return
        from pyspark import SparkContext

        proc = getattr(gateway, "proc", None)
        with contextlib.suppress(Exception):
            if not kill:
                session.stop()
            elif proc is not None:
                proc.terminate()
        _end_gateway(gateway, timeout=5 if kill else 20)
        if kill:  # what session.stop() would have cleared, so no one finds the dead session
            from pyspark.sql import SparkSession

            with contextlib.suppress(Exception):
                session.sparkContext._jsc = None
            SparkSession._instantiatedSession = None
            SparkSession._activeSession = None
        SparkContext._gateway = None
        SparkContext._jvm = None
        SparkContext._active_spark_context = None


@contextlib.contextmanager
def spark_session(master: str | None = None) -> Iterator[SparkSession]:
    """A session for one checker run: reuses a running one, stops only what it started."""
    started = active_session() is None
    session = start_spark(master)
    try:
        yield session
    finally:
        if started:
            stop_spark()
