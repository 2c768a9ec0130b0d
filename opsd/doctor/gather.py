"""Gather the doctor's facts, per query in the `/status` shape: from a running daemon's `/status` document, or
offline from a config or a checkpoint, with the checks' own collect and evaluate steps (never apply).

Offline there is one sample only: lag in seconds comes from `$timestamp` where the queue has it, and time to drain is
unknown unless nothing is unread; the trim forecast knows a pending trim and the queues that never trim unread rows,
but no rates; the vital consumers' waiting rows are known, not how long they have stood still. A config also gives
the tuning values in force.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from opsd.checks.autotune.check import recommend
from opsd.checks.autotune.check import targets_for as autotune_targets
from opsd.checks.desync.evaluate import evaluate as evaluate_desync
from opsd.checks.lag.collect import collect as collect_lag
from opsd.checks.lag.evaluate import evaluate as evaluate_lag
from opsd.checks.positions.collect import QueryTarget, Reading, collect, targets_for
from opsd.checks.producers.collect import collect as collect_producers
from opsd.checks.producers.collect import targets_for as producers_targets
from opsd.checks.producers.decide import decide as decide_producers
from opsd.checks.producers.evaluate import evaluate as evaluate_producers
from opsd.checks.trim.collect import collect as collect_trim
from opsd.checks.trim.decide import decide as decide_trim
from opsd.checks.trim.evaluate import evaluate as evaluate_trim
from opsd.checks.trim.facts import Sample
from opsd.checks.tuning.collect import collect as collect_tuning
from opsd.checks.tuning.collect import sources_for
from opsd.checks.vital.collect import collect as collect_vital
from opsd.checks.vital.evaluate import evaluate as evaluate_vital
from opsd.config.models import OpsdConfig
from opsd.observe.status import jsonable
from streaming_core.cluster import Cluster


def from_status(document: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The queries of a daemon's `/status` document."""
    return {name: dict(q) for name, q in (document.get("queries") or {}).items()}


def read_positions(cluster: Cluster, targets: Iterable[QueryTarget], at: float) -> Reading:
    """The targets' positions, read now as the checks read them (never healed: the doctor changes nothing)."""
    return collect(cluster, [replace(t, heal=False) for t in targets], None, at)


def from_targets(cluster: Cluster, targets: Iterable[QueryTarget], at: float,
                 reading: Reading | None = None) -> dict[str, dict[str, Any]]:
    """Desync and lag of each target, read now (or from `reading`)."""
    reading = reading or read_positions(cluster, targets, at)
    queries: dict[str, dict[str, Any]] = {}
    for q in reading.queues:
        queries.setdefault(q.query, {"desync": {}})["desync"][q.queue] = jsonable(evaluate_desync(q))
    lags = {sample.query: evaluate_lag(sample, (), window_seconds=0)
            for sample in collect_lag(cluster, reading.queues, reading.at)}
    for query, lag in lags.items():
        queries[query]["lag"] = jsonable(lag)
    for facts in collect_trim(reading, lags.get):
        trim = decide_trim(evaluate_trim(facts, {p.partition: (Sample.of(facts.at, p),) for p in facts.partitions}))
        queries[facts.query].setdefault("trim", {})[facts.queue] = jsonable(trim)
    for facts in collect_vital(reading):
        audit = evaluate_vital(facts, None)
        for query in facts.readers:
            queries[query].setdefault("vital_consumers", []).append({**jsonable(audit), "own": facts.own(query)})
    return queries


def from_config(cluster: Cluster, config: OpsdConfig, at: float) -> dict[str, dict[str, Any]]:
    """Every pipeline and watched query of a config: desync, lag, the tuning values in force, the producers of those
    in producer mode and the auto-tuner's recommendation (from what the cluster shows: no batch history offline)."""
    reading = read_positions(cluster, targets_for(config), at)
    queries = {p.name: {} for p in config.pipelines} | from_targets(cluster, (), at, reading)
    for pipeline in config.pipelines:
        values = collect_tuning(cluster, sources_for(pipeline, dict(config.spark.conf)))
        queries[pipeline.name].update(max_rows_per_partition=values.max_rows_per_partition,
                                      dyn_batch_size=values.dyn_batch_size)
    for target in producers_targets(config):
        report = decide_producers(evaluate_producers(collect_producers(cluster, target, None, at)))
        queries.setdefault(target.query, {})["producers"] = jsonable(report)
    for target in autotune_targets(config):
        decisions = recommend(cluster, target, positions=reading.of(target.query))
        queries.setdefault(target.query, {})["autotune"] = jsonable(decisions)
    return queries
