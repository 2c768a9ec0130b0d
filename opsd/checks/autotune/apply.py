"""Apply the auto-tuner's decisions: write the changed values to the query's tuning documents
(`streaming_core.tuning.write_tuning`); the source and the sink pick them up at their next batch. And plan a failed
run's batch again (`replan`: its `offsets/N` removed from the checkpoint, `streaming_core.checkpoint`).

The only step of the auto-tuner that writes to the cluster or the checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from opsd.checks.autotune.decide import Decision, Direction, Replan
from opsd.results.autotune import Knob
from streaming_core.checkpoint import drop_planned_batch
from streaming_core.cluster import Cluster
from streaming_core.tuning import write_tuning

log = structlog.get_logger(__name__)


def apply(cluster: Cluster, source_document: str | None, sink_document: str | None,
          decisions: Sequence[Decision]) -> list[Decision]:
    """Write the decisions that change a value; returns those written."""
    written = []
    for d in decisions:
        if d.direction == Direction.HOLD:
            continue
        match d.knob:
            case Knob.MAX_ROWS | Knob.MAX_BYTES:
                path = source_document
            case Knob.DYN_BATCH_SIZE:
                path = sink_document
        if path is None:
            log.warning("autotune_no_document", query=d.query, knob=d.knob)
            continue
        write_tuning(cluster, path, reason=f"autotune: {d.reason}", **{d.knob.value: d.recommended})
        log.info("autotune_applied", query=d.query, knob=d.knob, path=path, value=d.recommended, reason=d.reason)
        written.append(d)
    return written


def replan(cluster: Cluster, checkpoint: str, decision: Replan) -> bool:
    """Remove the failed run's planned batch, so the restart plans it under the cap in force; False when refused."""
    if decision.refused:
        log.warning("autotune_replan_refused", query=decision.query, batch_id=decision.batch_id,
                    reason=decision.refused, effect="the restart replays the batch with its planned range")
        return False
    drop_planned_batch(checkpoint, decision.batch_id, cluster.uri)
    log.info("autotune_replanned", query=decision.query, batch_id=decision.batch_id, checkpoint=checkpoint)
    return True
