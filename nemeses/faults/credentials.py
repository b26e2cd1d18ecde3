"""Faults of a secured cluster (``--security``): the clients' ACLs on one kind of resource
withdrawn for the fault's length and given back, their credentials replaced under load. A
correct client fails cleanly (refused, it exits and a successor takes its slot once the ACLs
are back) and exactly-once holds across the change."""

from __future__ import annotations

import random
from typing import Any

from nemeses.faults.base import Action
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


def credential_rotate_start(
    ctx: FaultContext, params: dict[str, Any], roll: Action
) -> dict[str, Any]:
    """An operator's rotation: the new password (or key and certificate) in the cluster and
    in the clients' files, then every client process restarted in turn to read it, by
    ``roll`` (the registry hands over ``roll-processors``' start, for a clean roll). On
    ``sasl_ssl`` a client not restarted yet finds its login refused at its next
    re-authentication: a correct one exits 8 and its slot gets a successor."""
    rotated = ctx.cluster.rotate_client_credentials()
    if ctx.clients is None:
        return {"rotated": rotated}
    roll_done = roll(ctx, {"clean": True, "seed": params.get("pick", 0)})
    why = f"{rotated}, then a clean rolling restart of the processors to read it"
    return {"rotated": rotated, "targets": roll_done["targets"], "why": why}
