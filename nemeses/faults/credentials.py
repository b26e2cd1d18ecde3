"""Faults of a secured cluster (``--security``): the clients' ACLs on one kind of resource
withdrawn for the fault's length and given back, their credentials replaced under load. A
correct client fails cleanly (refused, it exits and a successor takes its slot once the ACLs
are back) and exactly-once holds across the change."""

from __future__ import annotations

import random
from typing import Any

from nemeses.targets import FaultContext

#: The kinds of resource whose ACLs ``acl-revoke`` withdraws (the eos workload holds all).
ACL_RESOURCES = ("transactional_id", "group", "topic")


def acl_revoke_params(rng: random.Random, nodes: int, has_clients: bool) -> dict[str, Any]:
    return {"resource": rng.choice(ACL_RESOURCES)}


def acl_revoke_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    resource = str(params.get("resource", ACL_RESOURCES[0]))
    gone = ctx.cluster.withdraw_client_acls(resource)
    return {"resource": resource, "withdrawn": gone, "why": f"the clients' {resource} ACLs"}


def acl_revoke_stop(ctx: FaultContext, details: dict[str, Any]) -> dict[str, Any]:
    return {"restored": ctx.cluster.restore_client_acls(details["resource"])}


def credential_rotate_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    return {"rotated": ctx.cluster.rotate_client_credentials()}
