"""Faults of a secured cluster (``--security``): the clients' ACLs on one kind of resource
withdrawn for the fault's length and given back, their credentials replaced under load. A
correct client fails cleanly (refused, it exits and a successor takes its slot once the ACLs
are back) and exactly-once holds across the change. On ``sasl_ssl``, a broker paused for
longer than the clients' SASL sessions last: every session on it runs out while it is
stopped, so when it runs again it closes each connection whose next request is not a
re-authentication (KIP-368), requests in flight and all, and the clients reconnect in the
middle of their transactions."""

from __future__ import annotations

import random
from typing import Any

from nemeses.faults import brokers, clients
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
    """An operator's rotation: the new password (or key and certificate) in the cluster and
    in the clients' files, then every client process restarted in turn to read it (a clean
    rolling restart). On ``sasl_ssl`` a client not restarted yet finds its login refused at
    its next re-authentication: a correct one exits 8 and its slot gets a successor."""
    rotated = ctx.cluster.rotate_client_credentials()
    if ctx.clients is None:
        return {"rotated": rotated}
    roll = clients.roll_processors_start(ctx, {"clean": True, "seed": params.get("pick", 0)})
    why = f"{rotated}, then a clean rolling restart of the processors to read it"
    return {"rotated": rotated, "targets": roll["targets"], "why": why}


def reauth_pause_start(ctx: FaultContext, params: dict[str, Any]) -> dict[str, Any]:
    reauth_ms = ctx.cluster.reauth_ms
    details = brokers.pause_start(ctx, params)
    why = f"{details['why']}, for longer than the clients' {reauth_ms} ms SASL sessions"
    return {**details, "reauth_ms": reauth_ms, "why": why}
