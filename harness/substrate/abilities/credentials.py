"""A secured cluster's ACLs and credentials: the clients' ACLs granted, withdrawn and given
back, their credentials replaced under load. The ``nemeses.control.Credentials`` ability, and
the ACLs a run grants before its load (``harness.run.runner``).

A processor the authorizer refuses exits 8 and, outside a fault, stops the run; while the
clients' ACLs are withdrawn, and for :data:`REFUSAL_GRACE_S` after anything was changed, a
refusal is what the fault asked for and the processor's slot gets a successor as after any
exit (:meth:`refusals_expected`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from common.errors import HarnessError
from common.kafkaconf import REAUTH_MS
from common.waits import wait_for
from harness.kafka.security import CLIENT_IDENTITIES, MECHANISM, new_password

if TYPE_CHECKING:
    from common.acls import Acl
    from harness.kafka.security import Material
    from harness.substrate.api import ClusterConfig

#: How long after the clients' ACLs or credentials changed a refusal still counts as the
#: fault's: a processor refused just before the change may take this long to exit.
REFUSAL_GRACE_S = 20.0
#: The clients' principal, as the authorizer names it.
CLIENT_PRINCIPAL = f"User:{CLIENT_IDENTITIES[0]}"


def _binding(principal: str, acl: Acl, as_filter: bool = False) -> Any:
    """``acl`` of ``principal`` from any host, as a binding (or the filter that matches it)."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return (AclBindingFilter if as_filter else AclBinding)(
        ResourceType[acl.resource.upper()],
        acl.name,
        ResourcePatternType.PREFIXED if acl.prefixed else ResourcePatternType.LITERAL,
        principal,
        "*",
        AclOperation[acl.operation.upper()],
        AclPermissionType.ALLOW,
    )


class ClientCredentials:
    """ACLs through the admin client (the harness is a super user); credentials through the
    admin client (SCRAM) or the cluster's CA (certificates)."""

    config: ClusterConfig
    security: Material | None
    #: The clients' ACLs in force, those a fault withdrew, and until when a refusal is a
    #: fault's (monotonic seconds): set empty by :meth:`_init_credentials`.
    _granted: list[Acl]
    _withdrawn: list[Acl]
    _refusals_until: float

    def _init_credentials(self) -> None:
        self._granted, self._withdrawn, self._refusals_until = [], [], 0.0

    def admin(self) -> Any: ...

    @property
    def secured(self) -> bool:
        """Whether the cluster runs an authorizer with credentials (``--security``)."""
        return self.config.security != "plaintext"

    @property
    def reauth_ms(self) -> int | None:
        """How long the clients' SASL sessions last before they must re-authenticate
        (``sasl_ssl``: :data:`common.kafkaconf.REAUTH_MS`); None without SASL."""
        return REAUTH_MS if self.config.security == "sasl_ssl" else None

    def refusals_expected(self) -> bool:
        """Whether a client refused for want of an ACL now is a fault's doing."""
        return time.monotonic() < self._refusals_until

    def grant(self, principal: str, acls: Iterable[Acl]) -> None:
        """Allow ``principal`` (``User:NAME``) each of ``acls``, from any host, and wait
        until the brokers answer with them (the authorizer reads them from the metadata)."""
        from confluent_kafka import KafkaException

        wanted = list(acls)
        if not wanted:
            return
        admin = self.admin()
        bindings = [_binding(principal, a) for a in wanted]
        for binding, future in admin.create_acls(bindings, request_timeout=30).items():
            try:
                future.result(timeout=30)
            except KafkaException as exc:
                raise HarnessError(f"creating the ACL {binding} failed: {exc}") from None
        if principal == CLIENT_PRINCIPAL:
            self._granted += [a for a in wanted if a not in self._granted]
        self._wait_acls(principal, lambda n: n >= len(bindings))

    def _wait_acls(self, principal: str, done: Any) -> None:
        from confluent_kafka.admin import (
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        everything = AclBindingFilter(
            ResourceType.ANY,
            None,
            ResourcePatternType.ANY,
            principal,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        admin = self.admin()

        def listed() -> bool:
            got = admin.describe_acls(everything, request_timeout=10).result(timeout=10)
            return bool(done(len(got)))

        wait_for(listed, timeout=30, what=f"the ACLs of {principal} in effect")

    def withdraw_client_acls(self, resource: str) -> list[str]:
        """Delete the clients' ACLs on ``resource`` (a kind: topic, group, transactional_id);
        refusals are expected until they are given back. Their texts."""
        gone = [a for a in self._granted if a.resource == resource]
        if not gone:
            raise HarnessError(f"the clients hold no ACL on a {resource}")
        self._refusals_until = math.inf
        filters = [_binding(CLIENT_PRINCIPAL, a, as_filter=True) for a in gone]
        for future in self.admin().delete_acls(filters, request_timeout=30).values():
            future.result(timeout=30)
        left = len(self._granted) - len(gone)
        self._wait_acls(CLIENT_PRINCIPAL, lambda n: n <= left)
        self._granted = [a for a in self._granted if a not in gone]
        self._withdrawn += gone
        return [a.text() for a in gone]

    def restore_client_acls(self, resource: str) -> list[str]:
        """Give back what :meth:`withdraw_client_acls` took on ``resource``; their texts."""
        back = [a for a in self._withdrawn if a.resource == resource]
        self.grant(CLIENT_PRINCIPAL, back)
        self._withdrawn = [a for a in self._withdrawn if a not in back]
        if not self._withdrawn:
            self._refusals_until = time.monotonic() + REFUSAL_GRACE_S
        return [a.text() for a in back]

    def rotate_client_credentials(self) -> str:
        """Replace the clients' credentials: a new SCRAM password (set in the cluster, then
        written to the clients' password file) or a new key and certificate from the
        cluster's CA. Running clients keep their authenticated connections; a new connection
        with the old password is refused, and successors read the new files."""
        if self.security is None:
            raise HarnessError("the cluster has no credentials to rotate (--security)")
        identity = CLIENT_IDENTITIES[0]
        if not self.security.passwords:
            self.security.reissue(identity)
            return f"{identity}'s key and certificate reissued by the cluster's CA"
        from confluent_kafka.admin import (
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        password = new_password()
        mechanism = ScramMechanism[MECHANISM.replace("-", "_")]
        upsert = UserScramCredentialUpsertion(
            identity, ScramCredentialInfo(mechanism, 8192), password.encode()
        )
        for future in self.admin().alter_user_scram_credentials([upsert]).values():
            future.result(timeout=30)
        self.security.write_password(identity, password)
        self._refusals_until = max(self._refusals_until, time.monotonic() + REFUSAL_GRACE_S)
        return f"{identity}'s SCRAM password replaced"
