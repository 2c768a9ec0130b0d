"""The scheduled desync check: for every query, collect -> evaluate -> record, and where healing is enabled
decide -> apply. Queries come from the config (pipelines opsd runs, `watch:` entries) and, for a session opsd is
attached to, from the progress events of its running queries (their offsets carry the consumer path).

One query's failure (an unreadable checkpoint, a missing consumer) is recorded as that query's problem and never
stops the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import structlog

from opsd.checks.desync.apply import HealResult, apply
from opsd.checks.desync.collect import FROM_PROGRESS, DesyncTarget, collect_checkpoint, collect_progress
from opsd.checks.desync.decide import HealOutcome, decide
from opsd.checks.desync.evaluate import QueueDesync, evaluate
from opsd.checks.desync.facts import QueueFacts
from opsd.config.models import OpsdConfig
from opsd.observe.recorder import Recorder
from streaming_core.checkpoint import newest_batch, read_checkpoint
from streaming_core.cluster import Cluster, ClusterError, connect
from streaming_core.options import CONSUMER_PATH

log = structlog.get_logger(__name__)

#: `{query name: its recent progress events as dicts, oldest first}` of the queries running in the session.
ProgressSource = Callable[[], Mapping[str, Sequence[Mapping[str, Any]]]]


def targets_for(config: OpsdConfig) -> list[DesyncTarget]:
    """The config's queries with a known checkpoint: yt pipelines (healed when `checks.heal`) and `watch:` entries."""
    run = [DesyncTarget(p.name, p.checkpoint_location, p.source.path, p.source.options.get(CONSUMER_PATH),
                        heal=config.checks.heal)
           for p in config.pipelines if p.source.format == "yt" and p.checkpoint_location]
    watched = [DesyncTarget(w.name, w.checkpoint_location, w.queue, w.consumer, heal=w.heal) for w in config.watch]
    return run + watched


def collect_target(cluster: Cluster, target: DesyncTarget, *, stopped: bool = False) -> list[QueueFacts]:
    """A target's facts; a failure to read them becomes the target's problem (never raised): a damaged or crafted
    checkpoint (`CheckpointError` names its file), a client's own error, anything, so that one watched query never
    stops the check of the others."""
    try:
        facts = collect_checkpoint(cluster, target, read_checkpoint(target.checkpoint, cluster.uri))
    except Exception as e:  # isolation: the problem is recorded and logged as this target's, with its class
        return [_failed(target.query, target.queue, target.consumer, target.checkpoint or "", e)]
    return [replace(f, query_stopped=stopped) for f in facts]


def _attached(cluster: Cluster, query: str, events: Sequence[Mapping[str, Any]]) -> list[QueueFacts]:
    """An attached query's facts from its progress; a failure becomes its problem (never raised)."""
    try:
        return collect_progress(cluster, query, events)
    except (ValueError, KeyError, ClusterError) as e:
        return [_failed(query, None, None, FROM_PROGRESS, e)]


def _failed(query: str, queue: str | None, consumer: str | None, source: str, error: Exception) -> QueueFacts:
    problem = _error(error)
    log.warning("desync_collect_failed", query=query, source=source, error=problem)
    return QueueFacts(query, queue or "", consumer or "", source, None, None, problem=problem)


def _error(error: Exception) -> str:
    return f"{type(error).__name__}: {error}"


#: Outcomes that only mean "not now": a batch runs, or the running query will acknowledge the batch by itself.
WAITS = (HealOutcome.BATCH_RUNNING, HealOutcome.QUERY_BUSY)


def collect_queries(cluster: Cluster, targets: Sequence[DesyncTarget], progress: ProgressSource | None,
                    stopped: Callable[[str], bool] = lambda query: False,
                    ) -> list[tuple[QueueFacts, DesyncTarget | None]]:
    """Facts of every target, then of every query in `progress` that no target names (target None)."""
    found = [(f, t) for t in targets for f in collect_target(cluster, t, stopped=stopped(t.query))]
    known = {t.query for t in targets}
    for query, events in (progress() if progress else {}).items():
        if query not in known:
            found += [(f, None) for f in _attached(cluster, query, events)]
    return found


class DesyncCheck:
    """`scheduler.add_check("desync", DesyncCheck(...).run, interval)`."""

    def __init__(self, cluster_uri: str | None, recorder: Recorder, targets: Iterable[DesyncTarget] = (),
                 progress: ProgressSource | None = None) -> None:
        self.cluster_uri = cluster_uri
        self.recorder = recorder
        self.targets = list(targets)
        self.progress = progress

    def _stopped(self, query: str) -> bool:
        status = self.recorder.status.get(query)
        return status is not None and status.started_at is not None and not status.active

    def run(self) -> list[QueueDesync | HealResult]:
        """Record every query's desync and heal where enabled; returns the desyncs and heal results."""
        done: list[QueueDesync | HealResult] = []
        with connect(self.cluster_uri) as cluster:
            for facts, target in collect_queries(cluster, self.targets, self.progress, self._stopped):
                desync = evaluate(facts)
                self.recorder.record_desync(facts.query, facts.queue, view(desync))
                done.append(desync)
                if target is not None and target.heal and desync.partitions:
                    done.append(self.heal(cluster, desync, target))
        return done

    def heal(self, cluster: Cluster, desync: QueueDesync, target: DesyncTarget) -> HealResult:
        """Decide and apply; counted when some partition is behind, unless it only has to wait for the query."""
        decision = decide(desync)
        try:
            result = apply(cluster, decision, lambda: newest_batch(target.checkpoint, cluster.uri))
        except Exception as e:  # isolation, as in `collect_target`: the heal fails, the other queries' go on
            log.warning("desync_heal_failed", query=decision.query, queue=decision.queue, error=_error(e))
            result = HealResult(decision, HealOutcome.FAILED)
        behind = any(p.difference_rows > 0 for p in desync.partitions)
        if behind and result.outcome not in WAITS:
            self.recorder.record_heal(desync.facts.query, desync.facts.queue, result.outcome.value,
                                      {str(p): list(m) for p, m in result.moves.items()})
        return result


def view(desync: QueueDesync) -> dict[str, Any]:
    """A queue's desync as JSON-ready data: what `/status`, the metrics and `opsd doctor` show."""
    facts = desync.facts
    return {
        "consumer": facts.consumer, "source": facts.source, "state": desync.state and desync.state.value,
        "committed_batch": facts.committed_batch, "planned_batch": facts.planned_batch, "problem": facts.problem,
        "partitions": {
            str(p.facts.partition): {
                "state": p.state.value, "difference_rows": p.difference_rows,
                "checkpoint_next": p.facts.checkpoint_next, "consumer_offset": p.facts.consumer_offset,
                "row_count": p.facts.row_count, "trimmed_row_count": p.facts.trimmed_row_count,
            } for p in desync.partitions},
    }
