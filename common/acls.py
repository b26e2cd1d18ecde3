"""The ACLs a workload's clients need on a secured cluster: what a workload declares
(``WorkloadSpec.acls``) and the harness grants (``KafkaTools.grant``), in one shape both may
import."""

from __future__ import annotations

from dataclasses import dataclass

#: The resources an ACL of a workload's clients names (Kafka's resource types).
ACL_RESOURCES = ("topic", "group", "transactional_id", "cluster")


@dataclass(frozen=True)
class Acl:
    """One permission the clients under test need on a secured cluster: ``operation``
    (Kafka's: read, write, describe, ...) on a resource, by exact name or by prefix."""

    resource: str
    name: str
    operation: str
    prefixed: bool = False

    def text(self) -> str:
        """How a person reads it: ``Write on transactional ids prefixed "eos"``."""
        kind = self.resource.replace("_", " ")
        how = "prefixed" if self.prefixed else "named"
        return f'{self.operation.replace("_", " ").capitalize()} on {kind}s {how} "{self.name}"'
