"""Named fault schedules: recipes from bug reports, given by name to ``--nemesis``.

A recipe fixes what a bug's reproduction needs from the faults (which kinds, how long each
fault lasts, how much calm between them, which sub-choices are pinned) and leaves the rest to
the seed, so ``--nemesis kafka-17754 --seed 3`` is as reproducible as any other schedule and
its executed form is saved in ``schedule.json`` like every other. Client-side settings that
belong to a recipe (timeouts, delays between the operations of a transaction) are the
workload's business and are named here only as advice, in ``with_flags``: the nemesis room
does not reach into the clients.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Recipe:
    name: str
    #: What the recipe reproduces, one sentence.
    description: str
    kinds: tuple[str, ...]
    #: Seconds of calm after a fault ends and before the next starts.
    interval: float
    #: Each fault lasts a duration drawn uniformly from this range (seconds).
    duration_range: tuple[float, float]
    #: Per kind, parameters pinned over the ones the seed draws.
    pinned: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The run flags the original reproduction used beside these faults (advice; recorded
    #: in docs and matrix scenarios, not applied by the nemesis).
    with_flags: tuple[str, ...] = ()


RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe(
            name="kafka-17754",
            description="Jepsen's KAFKA-17754 reproduction: broker SIGSTOPs of 0-30 s, "
            "a new one about every 15 s, aimed at leaders, coordinators and the controller",
            kinds=("pause",),
            interval=0.5,
            duration_range=(0.0, 30.0),
            with_flags=(
                "--transaction-timeout-ms 1000",
                "--client-config request.timeout.ms=3000",
                # The Java client's name; librdkafka caps message.timeout.ms at the
                # transaction timeout itself and refuses a larger one.
                "--client-config delivery.timeout.ms=10000",
                "--txn-delay-ms 100",
            ),
        ),
        Recipe(
            name="delayed-endtxn",
            description="KAFKA-17754's delayed EndTxn made precise: a processor's EndTxn is "
            "withheld (the client's retry goes through) and the original delivered after its "
            "next transaction began, every ~10 s; delays inside each transaction keep it open",
            kinds=("late-endtxn",),
            interval=3.0,
            duration_range=(6.0, 10.0),
            # Commits: a correct processor aborts only on errors, so an armed abort rarely
            # finds an EndTxn to hold.
            pinned={"late-endtxn": {"end_txn": "commit"}},
            with_flags=("--txn-delay-ms 100",),
        ),
        Recipe(
            name="delayed-produce",
            description="KIP-890's late produce request made precise: a processor's Produce "
            "is withheld at a partition leader (the client's retry goes through) and the "
            "original delivered after its transaction's EndTxn, every ~10 s; voluntary "
            "aborts give it aborted transactions to land after",
            kinds=("late-produce",),
            interval=3.0,
            duration_range=(6.0, 10.0),
            with_flags=("--txn-delay-ms 100", "--abort-probability 0.3"),
        ),
        Recipe(
            name="coordinator-pause",
            description="SIGSTOP of a processor's transaction coordinator as its EndTxn goes "
            "out (the processor is held at before-commit until the broker is stopped)",
            kinds=("coordinator-at",),
            interval=5.0,
            duration_range=(1.0, 15.0),
            pinned={"coordinator-at": {"at": "before-commit", "fault": "pause"}},
        ),
        Recipe(
            name="coordinator-kill",
            description="SIGKILL of a processor's transaction coordinator after its offsets "
            "were sent and before its EndTxn (the offsets stay pending until a new coordinator "
            "ends the transaction, at the latest on its timeout), restarted 8-14 s later",
            kinds=("coordinator-at",),
            interval=4.0,
            duration_range=(8.0, 14.0),
            pinned={"coordinator-at": {"at": "before-commit", "fault": "kill"}},
            with_flags=("--session-timeout-ms 6000", "--transaction-timeout-ms 10000"),
        ),
        Recipe(
            name="leaderless-marker",
            description="finding F9: a processor held before its EndTxn while the output "
            "partitions have no leader (moved to one broker, which is killed) when the "
            "coordinator rolls its transaction back on its timeout, once a minute; Kafka 4.3.0 "
            "on completes the transaction without the abort markers and its records hang",
            kinds=("leaderless-marker",),
            interval=5.0,
            # About as long as the fault takes (the rollback comes 10-20 s after the hold).
            duration_range=(50.0, 55.0),
        ),
        Recipe(
            name="kafka-20785",
            description="finding F13: a processor held before its EndTxn past its "
            "transaction timeout, until the coordinator has rolled the transaction back, "
            "every ~30 s; under transaction version 2 its commit is then refused with a fatal "
            "INVALID_TXN_STATE (KAFKA-20785), under 0 and 1 it is fenced",
            kinds=("pause-at",),
            interval=5.0,
            # The default 10 s timeout, then up to 10 s until the coordinator's next check.
            duration_range=(25.0, 28.0),
            pinned={"pause-at": {"at": "before-commit"}},
            with_flags=("--client java",),
        ),
        Recipe(
            name="kafka-20634",
            description="the broker coordinating the committers' groups cut from the "
            "controllers and its followers while their commits are pending, three fresh "
            "groups writing past the divergence on the new leader, healed 16-20 s after the "
            "cut; with --broker-patch resignation-delay the broker applies the new leader's "
            "high watermark before it unloads, and Kafka 4.x before 4.3.1 acknowledges three "
            "commits per cut that it then loses (KAFKA-20634, finding F14)",
            kinds=("controller-cut",),
            interval=6.0,
            # From the cut: the move takes 10-15 s, then the late groups commit.
            duration_range=(16.0, 20.0),
            with_flags=(
                "--workload offsets",
                "--offsets-groups 24",
                "--offsets-one-coordinator",
                # A committer told of a commit reads it back 2 s later, when the old
                # coordinator has unloaded: read at once, its stale memory answers.
                "--offsets-interval-ms 2000",
                "--broker-patch resignation-delay",
                "--broker-config offsets.commit.timeout.ms=30000",
                "--broker-config group.coordinator.append.linger.ms=0",
            ),
        ),
        Recipe(
            name="kafka-20742",
            description="partitions added to a share group's input topic under load, one or "
            "two every ~12 s: with share.auto.offset.reset=latest an affected broker starts "
            "their share partitions at the latest offset and never delivers what was written "
            "to them first (KAFKA-20742, fixed in 4.4.0)",
            kinds=("add-partitions",),
            interval=12.0,
            duration_range=(0.0, 0.0),
            with_flags=("--workload share", "--share-offset-reset latest"),
        ),
    )
}


def recipe(spec: str) -> Recipe | None:
    """The recipe ``spec`` names, or ``None`` when ``spec`` is a list of kinds."""
    return RECIPES.get(spec.strip())
