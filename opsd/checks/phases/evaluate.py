"""Evaluate a pipeline's batch phases: each recent batch with recorded parts, the batches not counted before and
the shares over all of them. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from opsd.checks.phases.facts import PhaseFacts
from opsd.observe.phases import BatchPhases, PhaseShares, batch_phases, shares_of


@dataclass(frozen=True)
class PhaseEvaluation:
    query: str
    shares: PhaseShares | None
    #: batches measured for the first time (the metric counts each batch once).
    new: tuple[BatchPhases, ...]


def evaluate(facts: PhaseFacts) -> PhaseEvaluation:
    measured = [m for b in facts.batches if (m := batch_phases(b, facts.records.get(b.batch_id))) is not None]
    previous = facts.previous
    counted = previous.last_batch_id if previous is not None and previous.run_id == facts.run_id else -1
    shares = shares_of(measured, facts.run_id)
    return PhaseEvaluation(facts.query, shares or previous, tuple(m for m in measured if m.batch_id > counted))
