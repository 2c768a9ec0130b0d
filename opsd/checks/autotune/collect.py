"""Collect what the auto-tuner decides from, per query: its recent batches, backlog and time to drain (the lag check's
view), OOM risk and safe cap and its last failure (all from the status store, where the listener and the checks
record them), the values in force (read like the tuning check reads them) and the sink's write statistics of the
last batch (`streaming_core.write_stats`).

The OOM check records `oom_risk` (0..1) and `oom_safe_max_rows_per_partition` on the query's status; until it
does, both are unknown (`MemoryLimit()`) and the tuner is conservative about them (`opsd.checks.autotune.decide`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opsd.checks.autotune.facts import Batch, Facts, MemoryLimit
from opsd.checks.tuning.collect import TuningSources
from opsd.checks.tuning.collect import collect as collect_tuning
from opsd.config.models import AutotuneSettings
from opsd.observe.status import QueryStatus
from streaming_core.cluster import Cluster
from streaming_core.tuning import Tuning, dyn_batch_size_in_force
from streaming_core.write_stats import read_write_stats

#: The status fields the OOM check fills (read with `getattr`: absent until that check records them).
OOM_RISK, OOM_SAFE_CAP = "oom_risk", "oom_safe_max_rows_per_partition"


@dataclass(frozen=True)
class AutotuneTarget:
    """A query the tuner looks after: where its values come from, its mode and its settings."""

    tuning: TuningSources
    mode: str
    settings: AutotuneSettings

    @property
    def query(self) -> str:
        return self.tuning.query


def batches(status: QueryStatus | None) -> tuple[Batch, ...]:
    """The status' recent progress summaries that carry a duration, as batches."""
    found = []
    for summary in status.recent_batches if status else ():
        if summary.get("duration_seconds") is None:
            continue
        found.append(Batch(int(summary["batch_id"]), int(summary.get("num_input_rows") or 0),
                           summary.get("largest_partition_rows"), float(summary["duration_seconds"]),
                           dict(summary.get("durations_seconds") or {})))
    return tuple(found)


def _drain(lag: Mapping[str, Any]) -> float | None:
    value = lag.get("time_to_drain_seconds")
    return math.inf if value == "+Inf" else None if value is None else float(value)


def memory_limit(status: QueryStatus | None) -> MemoryLimit:
    risk, cap = getattr(status, OOM_RISK, None), getattr(status, OOM_SAFE_CAP, None)
    return MemoryLimit(None if risk is None else float(risk), None if cap is None else int(cap))


def collect(cluster: Cluster, target: AutotuneTarget, status: QueryStatus | None,
            failure: str | None = None) -> Facts:
    """The query's facts; `failure` is the text of a failure the caller saw before the status did (the runner,
    before it restarts the query)."""
    failure = failure or (status.exception if status is not None and status.failed else None)
    in_force = collect_tuning(cluster, target.tuning)
    lag = (status.lag if status else None) or {}
    backlog = lag.get("backlog_rows", status.backlog_rows if status else None)
    return Facts(
        query=target.query,
        mode=target.mode,
        max_rows_per_partition=in_force.max_rows_per_partition,
        dyn_batch_size=in_force.dyn_batch_size,
        batches=batches(status),
        reads_queue=target.tuning.source_document is not None,
        trigger_interval_seconds=status.trigger_interval_seconds if status else None,
        backlog_rows=backlog,
        time_to_drain_seconds=_drain(lag),
        memory=memory_limit(status),
        failure=failure,
        failed_run=None if failure is None else (status and status.run_id) or failure,
        write=read_write_stats(cluster, target.tuning.sink_document) if in_force.dyn_batch_size else None,
        dyn_batch_size_ceiling=dyn_batch_size_in_force(Tuning(dyn_batch_size=target.settings.max_dyn_batch_size),
                                                       target.settings.max_dyn_batch_size),
    )
