"""Apply a heal: the source's own compare-and-set advance (`streaming_core.consumer.advance_consumer`) to the
committed batch's end, after checking once more that no batch was planned since the decision. The advance itself
refuses a target past the queue's end (read again there), whatever the decision said. A consumer that the advance
finds moved already (nothing to move, or moved by another writer at every attempt) is checked against the checkpoint
once more: a query that planned a batch meanwhile acknowledged the committed one itself, and the heal only waited.

The only step of the desync check that writes to the cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from opsd.checks.desync.decide import HealDecision
from opsd.results.desync import HealOutcome
from streaming_core.cluster import BeyondQueueEndError, Cluster, ConflictError
from streaming_core.consumer import advance_consumer

log = structlog.get_logger(__name__)

#: The newest batch id of the query's checkpoint and whether it is committed, read again just before the advance.
NewestBatch = Callable[[], tuple[int | None, bool]]


@dataclass(frozen=True)
class HealResult:
    """What a heal did: its outcome and the moves made, `{partition: (old, new)}`."""

    decision: HealDecision
    outcome: HealOutcome
    moves: dict[int, tuple[int, int]] = field(default_factory=dict)


def apply(cluster: Cluster, decision: HealDecision, newest_batch: NewestBatch | None = None) -> HealResult:
    """Heal as decided (`decision.heal`), else return the refusal as the outcome; never raises for a conflict or a
    target past the queue's end."""
    if not decision.heal:
        return HealResult(decision, decision.outcome)
    if _batch_planned(decision, newest_batch):
        return HealResult(decision, HealOutcome.BATCH_RUNNING)
    try:
        moves = advance_consumer(cluster, decision.consumer, decision.queue, decision.target)
    except ConflictError:
        if _batch_planned(decision, newest_batch):
            return HealResult(decision, HealOutcome.BATCH_RUNNING)
        log.warning("desync_heal_conflict", query=decision.query, queue=decision.queue, consumer=decision.consumer)
        return HealResult(decision, HealOutcome.CONFLICT)
    except BeyondQueueEndError as e:
        log.warning("desync_heal_refused", query=decision.query, queue=decision.queue, consumer=decision.consumer,
                    outcome=HealOutcome.AHEAD_OF_QUEUE.value, error=str(e))
        return HealResult(decision, HealOutcome.AHEAD_OF_QUEUE)
    if not moves and _batch_planned(decision, newest_batch):
        return HealResult(decision, HealOutcome.BATCH_RUNNING)
    log.info("desync_healed", query=decision.query, queue=decision.queue, consumer=decision.consumer,
             batch_id=decision.committed_batch, moves={str(p): list(m) for p, m in sorted(moves.items())})
    return HealResult(decision, HealOutcome.HEALED if moves else HealOutcome.NOTHING_TO_HEAL, moves)


def _batch_planned(decision: HealDecision, newest_batch: NewestBatch | None) -> bool:
    """Whether the query planned a batch since the decision: then it acknowledges the committed batch on its consumer
    by itself (the source's advance), and a consumer found moved meanwhile was moved by the query, not healed."""
    return newest_batch is not None and newest_batch() != (decision.committed_batch, True)
