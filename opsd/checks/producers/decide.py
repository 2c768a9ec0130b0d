"""Decide how a query's producer stands: a problem reading it, sessions ahead of the query (its new rows are skipped:
act), a zombie attempt fenced off within `PRODUCER_FENCE_RECENT_SECONDS` (a warning: no row was duplicated, but a task
ran twice: lost executors or speculation), else ok. Pure."""

from __future__ import annotations

from opsd.checks.producers.facts import ProducerEvaluation
from opsd.config.thresholds import PRODUCER_FENCE_RECENT_SECONDS
from opsd.results.producers import ProducerReport, ProducerState


def decide(evaluation: ProducerEvaluation, recent_seconds: float = PRODUCER_FENCE_RECENT_SECONDS) -> ProducerReport:
    e = evaluation
    if e.problem is not None:
        state = ProducerState.PROBLEM
    elif e.sessions_ahead:
        state = ProducerState.SESSIONS_AHEAD
    elif e.fences and e.at - e.fences[-1].at <= recent_seconds:
        state = ProducerState.ZOMBIE_FENCED
    else:
        state = ProducerState.OK
    t = e.target
    return ProducerReport(t.query, t.producer, t.queue, t.numbering, e.at, state, e.sessions, e.epoch_total,
                          e.last_batch, e.fences, e.sessions_ahead, e.query_batch_id, e.counted, e.problem)
