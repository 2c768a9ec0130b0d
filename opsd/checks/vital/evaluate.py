"""Evaluate a vital consumer: the rows waiting for it and how long opsd has seen it stand still while they wait.
Pure: the facts and the consumer's previous audit.

Still means the same offsets in every partition it is vital for; the time counts from the first reading that found
it so with rows waiting (opsd cannot know how long it stood before it looked). Nothing waiting, or a move, is 0.
"""

from __future__ import annotations

from opsd.checks.vital.facts import VitalFacts
from opsd.results.vital import VitalConsumerAudit


def evaluate(facts: VitalFacts, previous: VitalConsumerAudit | None) -> VitalConsumerAudit:
    waiting = facts.waiting_rows
    if waiting == 0:
        since = None
    elif previous is not None and previous.since is not None and dict(previous.offsets) == dict(facts.offsets):
        since = previous.since
    else:
        since = facts.at
    return VitalConsumerAudit(facts.queue, facts.consumer, waiting, 0.0 if since is None else facts.at - since,
                              since, dict(facts.offsets))
