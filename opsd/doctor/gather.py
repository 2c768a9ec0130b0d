"""Gather the doctor's facts, per query in the `/status` shape: from a running daemon's `/status` document, or
offline from a config or a checkpoint, by the registry's own checks in their collect, evaluate and decide steps
(`opsd.checks.registry.build_diagnosis`: never a heal, a tuning write or a history entry), on one reading, into a
status store of the doctor's own.

Offline there is one sample only: lag in seconds comes from `$timestamp` where the queue has it, and time to drain is
unknown unless nothing is unread; the trim forecast knows a pending trim and the queues that never trim unread rows,
but no rates; the vital consumers' waiting rows are known, not how long they have stood still. A config also gives
the tuning values in force and the auto-tuner's recommendations (from what the cluster shows: no batch history).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry

from opsd.checks.registry import build_diagnosis
from opsd.collect.positions import QueryTarget, targets_for
from opsd.config.models import OpsdConfig
from opsd.observe.recorder import Recorder
from opsd.observe.status import QueryStatus, StatusStore, jsonable, status_of
from opsd.telemetry.metrics import Metrics
from streaming_core.cluster import Cluster

#: The facts a one-shot diagnosis finds (the rest of a `QueryStatus`, such as whether the query runs, only a daemon
#: knows: absent, never a default that would read as "stopped").
OFFLINE_FACTS = ("desync", "lag", "queue_agent", "trim", "vital_consumers", "autotune", "max_rows_per_partition",
                 "max_bytes_per_partition", "dyn_batch_size", "producers")
#: Facts shown even when None: the tuning values in force (None: no cap).
IN_FORCE = ("max_rows_per_partition", "dyn_batch_size")


@dataclass(frozen=True)
class Gathered:
    """Each query's status as the doctor found it; `offline`: read by the doctor itself (whether a query runs, its
    failures and its batches only a daemon knows)."""

    statuses: Mapping[str, QueryStatus]
    offline: bool

    def facts(self, query: str) -> dict[str, Any]:
        """A query's facts as the report shows them (the `/status` shape; offline, what the doctor found only)."""
        found = jsonable(self.statuses[query])
        if not self.offline:
            return found
        return {k: v for k, v in found.items() if k in OFFLINE_FACTS and (v is not None or k in IN_FORCE)}


def from_status(document: Mapping[str, Any]) -> Gathered:
    """The queries of a daemon's `/status` document, each read into its `QueryStatus` where it comes in (the one
    parser, `status_of`: a document this version cannot read fails here, not in the advice)."""
    return Gathered({name: status_of(name, q) for name, q in (document.get("queries") or {}).items()}, offline=False)


def diagnosed(cluster: Cluster, targets: Iterable[QueryTarget], at: float,
              config: OpsdConfig | None = None) -> dict[str, QueryStatus]:
    """Each query's status as the registry's checks find it now, at `at` (with a config: its tuning values and the
    auto-tuner's recommendations too)."""
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore(), clock=lambda: at)
    build_diagnosis(recorder, cluster.uri, targets, config=config, clock=lambda: at).run()
    return recorder.status.snapshot()


def from_targets(cluster: Cluster, targets: Iterable[QueryTarget], at: float) -> Gathered:
    """Desync, lag, Queue Agent signals, trim forecast and vital consumers of each target, read now."""
    return Gathered(diagnosed(cluster, targets, at), offline=True)


def from_config(cluster: Cluster, config: OpsdConfig, at: float) -> Gathered:
    """Every pipeline and watched query of a config: what `from_targets` finds, the tuning values in force and the
    auto-tuner's recommendations."""
    found = diagnosed(cluster, targets_for(config), at, config)
    return Gathered({p.name: QueryStatus(p.name) for p in config.pipelines} | found, offline=True)
