"""``python -m harness spark-lab up --store DIR``: a standalone Spark cluster to judge runs on,
without machines of one's own: a master and workers, each a container of an image built here
(``docker/sparklab``: the Docker backend's runtime image, Debian with Java 17, plus Python 3
for the Python workers some checks start on the executors), running the Spark of the
installed PySpark (its directory and its site-packages mounted read-only, so the cluster's
Spark and pyspark are exactly the driver's).

The executors read the runs' Parquet where the checks put it, in the run directories, so the
store is mounted into every worker at the same path: a shared volume standing in for the
NFS a real cluster would share. ``python -m checkers RUN_DIR --spark-master URL`` (or
``campaign``/``matrix``/``run`` with ``KAFKA_HARNESS_SPARK_MASTER=URL``) then judges on it.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

from common.errors import HarnessError
from common.waits import WaitTimeout, wait_for
from harness.substrate.docker import plan as dp
from harness.substrate.docker.engine import connect_engine, remove_labelled
from harness.substrate.docker.images import ensure_derived_image

log = logging.getLogger("harness.substrate.sparklab")

LABEL = "kafka-harness.sparklab"
REPO = "kafka-harness/sparklab"
SPARK_MOUNT = "/opt/spark"
SITE_MOUNT = "/opt/pyspark-site"
MASTER_PORT = 7077


def spark_home() -> Path:
    """The installed PySpark's directory: its ``bin/spark-class`` and ``jars``."""
    try:
        import pyspark
    except ImportError:
        raise HarnessError("the Spark lab needs pyspark (the spark extra)") from None
    return Path(pyspark.__file__).resolve().parent


def ensure_image(client: Any) -> str:
    """The lab's image (a JVM on the backend's runtime image), built on first use."""
    return ensure_derived_image(client, dp.docker_dir() / "sparklab", REPO)


def _daemon(main: str, *args: str) -> list[str]:
    """A Spark daemon bound to the container's own address."""
    words = " ".join(args)
    return [
        "sh",
        "-c",
        f"exec {SPARK_MOUNT}/bin/spark-class {main} --host $(hostname -i) {words}",
    ]


def lab_up(store: Path, workers: int = 2, memory: str = "2g", client: Any = None) -> str:
    """Start the master and ``workers`` workers; the master's URL once every worker is
    registered."""
    if workers < 1:
        raise HarnessError("spark-lab up needs at least one worker")
    store = store.expanduser().resolve()
    store.mkdir(parents=True, exist_ok=True)
    client = client or connect_engine()
    image = ensure_image(client)
    home = spark_home()
    site = home.parent  # pyspark and py4j, for the executors' Python workers
    name = uuid.uuid4().hex[:8]
    labels = {LABEL: name}
    network = f"kh-sparklab-{name}"
    mounts = {
        str(home): {"bind": SPARK_MOUNT, "mode": "ro"},
        str(site): {"bind": SITE_MOUNT, "mode": "ro"},
        str(store): {"bind": str(store), "mode": "rw"},
    }
    env = {"SPARK_HOME": SPARK_MOUNT, "SPARK_NO_DAEMONIZE": "1", "PYTHONPATH": SITE_MOUNT}
    try:
        client.networks.create(network, driver="bridge", labels=labels)
        master = client.containers.run(
            image,
            name=f"{network}-master",
            entrypoint=_daemon("org.apache.spark.deploy.master.Master", "--port", str(MASTER_PORT)),
            detach=True,
            init=True,
            network=network,
            environment=env,
            volumes=mounts,
            labels=labels,
        )
        master.reload()
        ip = master.attrs["NetworkSettings"]["Networks"][network]["IPAddress"]
        url = f"spark://{ip}:{MASTER_PORT}"
        for i in range(1, workers + 1):
            client.containers.run(
                image,
                name=f"{network}-worker{i}",
                entrypoint=_daemon(
                    "org.apache.spark.deploy.worker.Worker",
                    *("--cores", "1", "--memory", memory, "--work-dir", "/tmp/spark-work", url),
                ),
                detach=True,
                init=True,
                network=network,
                environment=env,
                volumes=mounts,
                labels=labels,
            )

        def registered() -> bool:
            logs = client.containers.get(master.id).logs().decode(errors="replace")
            return logs.count("Registering worker") >= workers

        try:
            wait_for(registered, timeout=120, what=f"{workers} Spark workers registered at {url}")
        except WaitTimeout as exc:
            raise HarnessError(str(exc)) from None
    except BaseException:
        remove_labelled(client, f"{LABEL}={name}")
        raise
    return url


def lab_down(client: Any = None) -> int:
    """Remove every Spark lab on this engine; how many containers went."""
    return remove_labelled(client or connect_engine(), LABEL)
