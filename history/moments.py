"""The protocol moments of one consume-transform-produce unit: the contract's names for them.

Why in the history package: the nemeses arm a processor at a moment by its name, the Python
and the Java processors (and any client that follows the client contract) fire at it by that
name, and the history records the moment that fired. One definition here; the Java processor
spells the same strings (``workloads/java/src/kafkaharness/EosProcessor.java``) and a test
holds it to this list.
"""

from __future__ import annotations

from typing import Final

#: Where a processor stops to run an armed hook, in execution order within one transaction:
#: records produced, the producer flushed, before the offsets are sent to the transaction,
#: before EndTxn (the commit), after the commit returned.
HOOK_POINTS: Final = (
    "after-produce",
    "after-flush",
    "before-offsets",
    "before-commit",
    "after-commit",
)
#: A moment armed at ``before-commit`` whose action fires a few ms into the commit call (EndTxn,
#: or the plain offset commit of an at-least-once client), from a timer.
DURING_COMMIT: Final = "during-commit"
#: Every moment a nemesis may arm, in execution order.
MOMENTS: Final = (*HOOK_POINTS[:4], DURING_COMMIT, HOOK_POINTS[4])
#: Moments before EndTxn, where a transaction can still fail with an abortable error (a
#: produce that timed out, an offset commit the group rejected): the client must abort it
#: and read its inputs again.
ABORT_MOMENTS: Final = HOOK_POINTS[:4]
#: What a nemesis arms a processor to do at its moment: SIGKILL itself, SIGSTOP itself, or
#: fail its transaction with an abortable error (only at an :data:`ABORT_MOMENTS` moment).
ARMED_ACTIONS: Final = ("kill", "stop", "abort")

__all__ = ["ABORT_MOMENTS", "ARMED_ACTIONS", "DURING_COMMIT", "HOOK_POINTS", "MOMENTS"]
