"""Evaluate a query's producer: its sessions, what changed since the previous run (epochs bumped, the last batch's
rows skipped as written before, fences recorded) and the sessions that stand ahead of the query. Pure.

Counting: each epoch bump, batch and fence is counted once per opsd process. The first run counts what the cluster
holds (the sum of the sessions' epochs, the last batch, the recorded fences); later runs count the changes: a sum of
epochs that fell (sessions removed) counts its new value. A batch's statistics are told apart by when they were
stored, so a batch stored again (aborted, then committed) counts again: its skipped rows were skipped twice.

A session stands ahead when (in batch numbering: `Session.batch_id` known) the batch it last wrote is more than
`ahead_batches` past the query's last completed batch: a query whose batch ids began again (a new checkpoint under
the same name) has its new rows skipped as written before, until its batches pass the sessions' or the sessions are
removed.
"""

from __future__ import annotations

from opsd.checks.producers.facts import ProducerEvaluation, ProducerFacts
from opsd.config.thresholds import PRODUCER_AHEAD_BATCHES
from opsd.results.producers import LastBatch, ProducerCounts, Session


def evaluate(facts: ProducerFacts, ahead_batches: int = PRODUCER_AHEAD_BATCHES) -> ProducerEvaluation:
    previous = facts.previous
    epoch_total = sum(s.epoch for s in facts.sessions)
    stats = facts.last_batch
    last = None if stats is None else LastBatch(stats.batch_id, stats.producer_sessions, stats.producer_epoch_bumps,
                                                stats.producer_skipped_rows, stats.at)
    known = {f.key for f in previous.fences} if previous else set()
    new_fences = tuple(f for f in facts.fences if f.key not in known)
    bumps = epoch_total - previous.epoch_total if previous and epoch_total >= previous.epoch_total else epoch_total
    counted_batch = previous.last_batch.at if previous and previous.last_batch else None
    skipped = last.skipped_rows if last is not None and last.at != counted_batch else 0
    if facts.problem is not None:  # nothing was read: nothing changed
        bumps, skipped, new_fences = 0, 0, ()
        epoch_total = previous.epoch_total if previous else 0
    new = ProducerCounts(bumps, skipped, len(new_fences))
    target = facts.target
    return ProducerEvaluation(
        target, facts.at, facts.sessions, epoch_total, last if facts.problem is None else None,
        facts.fences if facts.problem is None else (previous.fences if previous else ()),
        _ahead(facts.sessions, facts.query_batch_id, ahead_batches),
        facts.query_batch_id, facts.problem, new, new_fences,
        (previous.counted if previous else ProducerCounts()).plus(new))


def _ahead(sessions: tuple[Session, ...], query_batch_id: int | None, ahead_batches: int) -> tuple[str, ...]:
    if query_batch_id is None:
        return ()
    return tuple(s.session for s in sessions if s.batch_id is not None and s.batch_id > query_batch_id + ahead_batches)
