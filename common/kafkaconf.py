"""Client settings for a secured cluster: the client contract's ``security`` object turned into
a library's settings, and the harness's own clients secured in one place.

A secured cluster (``harness.kafka.security``) writes the harness's identity, per path (the
clients' listener through toxiproxy, the inter-broker one the harness observes through), to
a JSON file and names it in :data:`ENV`; the harness's own clients (admin, seeder, final
reads, readiness) pass their settings through :func:`secured`, which adds nothing while no
secured cluster is up. Processes the harness starts inherit the variable.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from typing import Any

ENV = "KAFKA_HARNESS_SECURITY"
#: How long a client's SASL session lasts on a ``sasl_ssl`` cluster's clients' listener
#: (``connections.max.reauth.ms``, KIP-368): the clients re-authenticate on live connections
#: before it runs out, and a broker closes a connection whose session ran out. Short, so that
#: every run exercises re-authentication, and the ``reauth-pause`` fault outlasts it; not
#: under 10 s, KafkaJS's margin (``reauthenticationThreshold``): with a shorter session it
#: re-authenticates at once after each login and the broker refuses it (ILLEGAL_SASL_STATE).
REAUTH_MS = 15000


def _password(security: dict[str, str]) -> str:
    """The SCRAM password in the object's ``password_file`` (read when a client is built, so a
    rotated password reaches every client built after it)."""
    with open(security["password_file"]) as f:
        return f.read().strip()


def librdkafka(security: dict[str, str] | None) -> dict[str, str]:
    """confluent-kafka (librdkafka) settings for a contract ``security`` object (None or
    empty: plaintext, no settings)."""
    if not security:
        return {}
    out = {
        "security.protocol": security["protocol"],
        "ssl.ca.location": security["ca"],
    }
    if security["protocol"] == "SASL_SSL":
        out |= {
            "sasl.mechanisms": security["mechanism"],
            "sasl.username": security["username"],
            "sasl.password": _password(security),
        }
    else:
        out |= {
            "ssl.certificate.location": security["certificate"],
            "ssl.key.location": security["key"],
        }
    return out


def java(security: dict[str, str] | None, password: str | None = None) -> dict[str, str]:
    """Kafka's Java client settings for the same object (PEM stores, Kafka 2.7 and later);
    ``password`` stands for the SCRAM password in the JAAS line (default: the password, read
    from its file now)."""
    if not security:
        return {}
    out = {
        "security.protocol": security["protocol"],
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": security["ca"],
    }
    if security["protocol"] == "SASL_SSL":
        password = _password(security) if password is None else password
        out |= {
            "sasl.mechanism": security["mechanism"],
            "sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{security["username"]}" password="{password}";'
            ),
        }
    else:
        out |= {"ssl.keystore.type": "PEM", "ssl.keystore.location": security["keystore"]}
    return out


#: Kafka's own config provider that reads a value from a file named after its key.
DIRECTORY_PROVIDER = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"


def java_by_reference(security: dict[str, str] | None, prefixes: tuple[str, ...]) -> dict[str, str]:
    """:func:`java`'s settings for a properties file a Java process reads at its start (a
    Connect worker's), once per prefix (``""``, ``"producer."``...): the password is not
    written, only a reference to its file, which Kafka's :data:`DIRECTORY_PROVIDER` resolves
    in the process."""
    if not security:
        return {}
    folder, name = os.path.split(security["password_file"])
    base = java(security, password=f"${{dir:{folder}:{name}}}")
    out = {"config.providers": "dir", "config.providers.dir.class": DIRECTORY_PROVIDER}
    for prefix in prefixes:
        out |= {prefix + k: v for k, v in base.items()}
    return out


@lru_cache(maxsize=4)
def _load(path: str) -> dict[str, Any]:
    with open(path) as f:
        doc: dict[str, Any] = json.load(f)
    return doc


def harness_security(bootstrap: str) -> dict[str, str] | None:
    """The harness identity's contract object for the path ``bootstrap`` belongs to, or None
    when no secured cluster is up or ``bootstrap`` is not one of its addresses (a plaintext
    cluster beside it, as a test worker's is)."""
    path = os.environ.get(ENV)
    if not path:
        return None
    doc = _load(path)
    which = doc["listeners"].get(bootstrap.split(",")[0].strip())
    if which is None:
        return None
    security: dict[str, str] = doc[which]
    return security


def secured(conf: dict[str, Any]) -> dict[str, Any]:
    """``conf`` (confluent-kafka settings with ``bootstrap.servers``) with the harness's
    identity added when a secured cluster is up."""
    return {**conf, **librdkafka(harness_security(str(conf.get("bootstrap.servers", ""))))}


def command_config(bootstrap: str) -> str | None:
    """A properties file for a Kafka tool's ``--command-config`` on the path ``bootstrap``
    belongs to, or None when no secured cluster is up. Written beside the settings file,
    which is in the cluster's scratch directory, removed with it."""
    security = harness_security(bootstrap)
    if security is None:
        return None
    props = java(security)
    path = os.path.join(os.path.dirname(os.environ[ENV]), f"tool-{security['protocol']}.properties")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("".join(f"{k}={v}\n" for k, v in props.items()))
    return path
