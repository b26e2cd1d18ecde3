"""Secured clusters (``--security tls|sasl_ssl``): a throwaway CA, one certificate per broker and
per identity, SCRAM passwords, the brokers' listener settings and the harness's own client
settings.

The modes are what operators run:

- ``tls``: every listener (clients', inter-broker, controller) is TLS with client
  certificates required; an identity is its certificate's common name.
- ``sasl_ssl``: the clients' listener is SASL/SCRAM-SHA-512 over TLS; brokers, controllers
  and the harness's observation path (the inter-broker listener) stay TLS with certificates,
  because a KRaft controller cannot check SCRAM credentials (they live in the metadata it
  serves).

Either way the brokers run the KRaft authorizer with nothing allowed that an ACL does not
allow; ``broker`` and ``harness`` are super users, every client identity gets exactly the
ACLs of its workload (``harness.kafka.acls``). toxiproxy stays in the clients' path: it
forwards TCP, so TLS passes through it unchanged, and the brokers' certificates name
127.0.0.1 (where clients reach them through toxiproxy) and each broker's own address.

Secrets (private keys, passwords) live in the cluster's scratch directory, which is removed
with the cluster. The brokers need none in their settings (their keys are unencrypted PEM
files there; SCRAM credentials go into the metadata at format time), so the stored
``server.properties`` holds none. Clients are handed file paths, never a secret. The
harness's own clients find their settings through :data:`common.kafkaconf.ENV`.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from common.errors import HarnessError
from common.kafkaconf import ENV, REAUTH_MS

MODES = ("plaintext", "tls", "sasl_ssl")
MECHANISM = "SCRAM-SHA-512"
SUPER_USERS = ("broker", "harness")
#: The identities of the clients under test: one, whose ACLs its workload decides.
CLIENT_IDENTITIES = ("client",)


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise HarnessError(f"unknown --security {mode!r} (one of {', '.join(MODES)})")
    return mode


@dataclass
class Material:
    """The files of one secured cluster, all under ``root`` (in the scratch directory)."""

    mode: str
    root: Path
    #: identity -> SCRAM password (sasl_ssl only); never written outside ``root``.
    passwords: dict[str, str] = field(default_factory=dict)
    #: The CA's key and certificate, in memory only: they sign what :meth:`issue` makes.
    ca_key: ec.EllipticCurvePrivateKey | None = field(default=None, repr=False)
    ca_cert: x509.Certificate | None = field(default=None, repr=False)

    @property
    def ca(self) -> Path:
        return self.root / "ca.pem"

    def cert(self, name: str) -> Path:
        return self.root / f"{name}.pem"

    def key(self, name: str) -> Path:
        return self.root / f"{name}.key"

    def keystore(self, name: str) -> Path:
        """Key and certificate in one PEM file: what a Java keystore of type PEM reads."""
        return self.root / f"{name}.keystore.pem"

    # --- certificates and passwords ---------------------------------------------------------

    def issue(self, file_name: str, cn: str, addresses: list[str]) -> None:
        """A key and a certificate for ``cn`` signed by the CA (naming ``addresses``), written
        as ``file_name``'s certificate, key and keystore (replacing any)."""
        assert self.ca_key is not None and self.ca_cert is not None
        now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn))
            .issuer_name(self.ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(self.ca_cert.not_valid_after_utc)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        if addresses:
            names: list[x509.GeneralName] = []
            for a in addresses:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(a)))
                except ValueError:
                    names.append(x509.DNSName(a))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert_pem = builder.sign(self.ca_key, hashes.SHA256()).public_bytes(
            serialization.Encoding.PEM
        )
        key_pem = _pem_key(key)
        ca_pem = self.ca.read_bytes()
        _write_secret(self.key(file_name), key_pem)
        _write_secret(self.keystore(file_name), key_pem + cert_pem + ca_pem)
        self.cert(file_name).write_bytes(cert_pem)

    def reissue(self, identity: str) -> None:
        """A new key and certificate for ``identity`` (a credential rotation under ``tls``)."""
        self.issue(identity, identity, [])

    def write_password(self, identity: str, password: str) -> None:
        """``identity``'s password, now the one the cluster holds, into its file."""
        self.passwords[identity] = password
        _write_secret(self.root / f"{identity}.password", password.encode())

    # --- what the brokers get -----------------------------------------------------------

    def broker_settings(
        self, node_id: int, at: str | None = None, observe: bool = False
    ) -> dict[str, str]:
        """Node ``node_id``'s settings over the plaintext ones: protocols per listener, its
        certificate, the authorizer and, for sasl_ssl, SCRAM on the clients' listener.
        ``at``: where the broker sees this directory (a container's mount), if not here;
        ``observe``: the node has the Docker backend's OBSERVE listener, secured as the
        inter-broker one."""
        client = "SSL" if self.mode == "tls" else "SASL_SSL"
        root = Path(at) if at is not None else self.root
        protocols = f"CLIENT:{client},INTERNAL:SSL,CONTROLLER:SSL"
        out = {
            "listener.security.protocol.map": protocols + (",OBSERVE:SSL" if observe else ""),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(root / self.keystore(f"broker-{node_id}").name),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(root / self.ca.name),
            "ssl.client.auth": "required",
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/,DEFAULT",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": ";".join(f"User:{u}" for u in SUPER_USERS),
        }
        if self.mode == "sasl_ssl":
            out.update(
                {
                    "listener.name.client.ssl.client.auth": "none",
                    "listener.name.client.sasl.enabled.mechanisms": MECHANISM,
                    # The clients' listener takes any SCRAM user; brokers never log in on it.
                    "listener.name.client.scram-sha-512.sasl.jaas.config": (
                        "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                    ),
                    "listener.name.client.scram-sha-512.connections.max.reauth.ms": str(REAUTH_MS),
                }
            )
        return out

    def format_args(self) -> list[str]:
        """``kafka-storage format`` arguments that put the SCRAM credentials into the
        cluster's first metadata (KIP-900), so they exist before any broker serves."""
        args: list[str] = []
        for user, password in sorted(self.passwords.items()):
            args += ["--add-scram", f"{MECHANISM}=[name={user},password={password}]"]
        return args

    # --- what clients get ---------------------------------------------------------------

    def contract(self, identity: str, path: str = "client") -> dict[str, str]:
        """The client contract's ``security`` object for ``identity`` on the clients'
        listener (``path="client"``) or the inter-broker one (``"internal"``): library
        neutral, secrets by file."""
        if self.mode == "sasl_ssl" and path == "client":
            return {
                "protocol": "SASL_SSL",
                "ca": str(self.ca),
                "mechanism": MECHANISM,
                "username": identity,
                "password_file": str(self.root / f"{identity}.password"),
            }
        return {
            "protocol": "SSL",
            "ca": str(self.ca),
            "certificate": str(self.cert(identity)),
            "key": str(self.key(identity)),
            "keystore": str(self.keystore(identity)),
        }

    def write_harness_settings(self, client: list[str], internal: list[str]) -> Path:
        """The harness's own settings, one set per path, for :mod:`common.kafkaconf`;
        ``client`` and ``internal`` are the addresses of each path."""
        listeners = {a: "client" for a in client} | {a: "internal" for a in internal}
        doc = {
            "mode": self.mode,
            "listeners": listeners,
            "client": self.contract("harness", "client"),
            "internal": self.contract("harness", "internal"),
        }
        path = self.root / "harness.json"
        path.write_text(json.dumps(doc, indent=1))
        return path


def new_password() -> str:
    """A fresh SCRAM password (set nowhere yet)."""
    return secrets.token_urlsafe(18)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write_secret(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def make_material(
    mode: str,
    root: Path,
    brokers: dict[int, list[str]],
    identities: list[str],
    days: int = 2,
) -> Material:
    """A CA and certificates under ``root``: ``broker-N`` for each node of ``brokers`` (its
    addresses, as IP or DNS names, in the certificate), one per identity and ``harness``;
    with ``sasl_ssl`` a SCRAM password per identity and for ``harness``."""
    check_mode(mode)
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o700)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    until = now + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("kafka-harness CA")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    material = Material(mode, root, ca_key=ca_key, ca_cert=ca_cert)
    material.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    for node_id, addresses in sorted(brokers.items()):
        material.issue(f"broker-{node_id}", "broker", addresses)
    for identity in ["harness", *identities]:
        if identity == "broker":
            raise HarnessError(f"identity {identity!r} is the brokers' own")
        material.issue(identity, identity, [])
        if mode == "sasl_ssl":
            material.write_password(identity, new_password())
    return material


def activate(path: Path | None) -> None:
    """Point this process (and the processes it starts) at the harness's settings, or at
    none."""
    if path is None:
        os.environ.pop(ENV, None)
    else:
        os.environ[ENV] = str(path)
