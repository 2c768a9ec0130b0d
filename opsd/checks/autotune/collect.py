"""Collect what the auto-tuner decides from, per query: its recent batches, backlog (from the cycle's positions) and
time to drain (the lag check's result), OOM risk and safe cap and its last failure (all from the status store, where
the listener and the checks record them), the values in force (read like the tuning check reads them) and the sink's
write statistics of the last batch (`streaming_core.write_stats`).

The OOM check records its verdict (`QueryStatus.oom`: the risk, 0..1, and the safe row and byte caps) on the query's
status; until it does, they are unknown and the tuner is conservative about them (`opsd.checks.autotune.decide`).

After a failure, the batch the checkpoint holds planned and uncommitted (`Uncommitted`), with why planning it again
could lose or duplicate output, if it could (`ReplanPolicy`): a stateful query's state or a sink that holds the
batch's output already (a transactional yt sink's commit log, Spark's file sink log) or promises a replayed batch id
the same rows (`foreachBatch`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import structlog

from opsd.checks.autotune.facts import Facts, Uncommitted
from opsd.checks.tuning.collect import TuningSources
from opsd.checks.tuning.collect import collect as collect_tuning
from opsd.config.models import AutotuneSettings, PipelineConfig
from opsd.observe.progress import BatchSummary
from opsd.observe.status import QueryStatus
from opsd.results.autotune import ReplanRefusal, TunerMode
from opsd.results.positions import QueryPositions
from streaming_core.checkpoint import Checkpoint, checkpoint_files, has_state, read_checkpoint
from streaming_core.cluster import Cluster
from streaming_core.options import CHECKPOINT_LOCATION, CLUSTER, PATH, SinkOptions
from streaming_core.sink import batch_committed
from streaming_core.tuning import Tuning, dyn_batch_size_in_force
from streaming_core.write_stats import read_write_stats

log = structlog.get_logger(__name__)

#: Sinks that cannot take a re-planned batch, and why.
REPLAN_REFUSED = {"foreachBatch": ReplanRefusal.FOREACH_BATCH, "parquet": ReplanRefusal.FILE_SINK}


@dataclass(frozen=True)
class ReplanPolicy:
    """Whether the query's planned, uncommitted batch may be planned again, as far as its config tells (no
    checkpoint: nothing opsd may touch, e.g. a watched query)."""

    checkpoint: str | None = None
    #: Why its sink cannot take a re-planned batch whatever the checkpoint holds; None when it can.
    refused: ReplanRefusal | None = None
    #: A yt sink's options: it can while its transactional commit log (if any) lacks the batch. Looked up whatever
    #: the options say: `transactional` may come from a Spark conf opsd does not see.
    yt_sink: SinkOptions | None = None


def replan_policy(pipeline: PipelineConfig, cluster_uri: str | None, spark_conf: Mapping[str, str]) -> ReplanPolicy:
    """A pipeline's `ReplanPolicy` (console, memory, at-least-once and idempotent yt sinks take a re-planned batch:
    every row still reaches them at least once, and an idempotent one writes a row twice as once)."""
    location, sink = pipeline.checkpoint_location, pipeline.sink
    if not location:
        return ReplanPolicy(refused=ReplanRefusal.NO_CHECKPOINT)
    if pipeline.stateful:
        return ReplanPolicy(location, ReplanRefusal.STATEFUL)
    options = None
    if sink.format == "yt":
        try:
            options = SinkOptions.parse({CLUSTER: cluster_uri or "", **sink.options, PATH: sink.path or "",
                                         CHECKPOINT_LOCATION: location}, spark_conf)
        except ValueError as e:
            log.warning("autotune_sink_options_unreadable", query=pipeline.name, error=str(e))
            return ReplanPolicy(location, ReplanRefusal.SINK_OPTIONS_UNREADABLE)
    return ReplanPolicy(location, REPLAN_REFUSED.get(sink.format), options)


@dataclass(frozen=True)
class AutotuneTarget:
    """A query the tuner looks after: where its values come from, its mode and its settings."""

    tuning: TuningSources
    mode: TunerMode
    settings: AutotuneSettings
    replan: ReplanPolicy = ReplanPolicy()

    @property
    def query(self) -> str:
        return self.tuning.query


def batches(status: QueryStatus | None) -> tuple[BatchSummary, ...]:
    """The status' recent batches that carry a duration."""
    return tuple(b for b in (status.recent_batches if status else ()) if b.duration_seconds is not None)


def uncommitted(cluster: Cluster, policy: ReplanPolicy) -> Uncommitted | None:
    """The checkpoint's planned, uncommitted batch, its largest partition's rows and why it may not be planned
    again (None: none planned, or the checkpoint cannot be read: logged, and then nothing is re-planned)."""
    if policy.checkpoint is None:
        return None
    try:
        files = checkpoint_files(policy.checkpoint, cluster.uri)
        checkpoint = read_checkpoint(policy.checkpoint, files=files)
        planned = checkpoint.planned
        if planned is None:
            return None
        rows = planned_rows(cluster, checkpoint)
        if policy.refused:
            return Uncommitted(planned.batch_id, rows, policy.refused)
        if has_state(policy.checkpoint, files=files):
            return Uncommitted(planned.batch_id, rows, ReplanRefusal.STATEFUL)
        if policy.yt_sink and batch_committed(policy.yt_sink, planned.batch_id):
            return Uncommitted(planned.batch_id, rows, ReplanRefusal.SINK_COMMITTED)
        return Uncommitted(planned.batch_id, rows)
    except Exception as e:  # a checkpoint opsd cannot read (or a client's own error) must not stop the tuning
        log.warning("autotune_checkpoint_unreadable", checkpoint=policy.checkpoint, error=f"{type(e).__name__}: {e}")
        return None


def planned_rows(cluster: Cluster, checkpoint: Checkpoint) -> int | None:
    """Rows of the largest yt partition of the planned batch: its end minus the committed batch's end (for the
    first batch, minus the consumer's offset, where the source starts); None when a queue's start is unknown."""
    planned = checkpoint.planned
    largest = 0
    for end in (s for s in planned.sources if s is not None) if planned else ():
        before = checkpoint.committed.queue(end.path) if checkpoint.committed else None
        if before is not None:
            start = before.partitions
        elif checkpoint.committed is None and end.consumer_path:
            start = {p: o - 1 for p, o in cluster.get_consumer_offsets(end.consumer_path, end.path).items()}
        else:
            return None
        largest = max([largest, *(last - start.get(p, -1) for p, last in end.partitions.items())])
    return largest


def backlog_rows(status: QueryStatus | None, positions: QueryPositions | None) -> int | None:
    """The query's unread rows: from this cycle's positions, else the lag check's last result, else the last
    progress event's."""
    known = positions.backlog_rows if positions is not None else None
    if known is not None:
        return known
    if status is None:
        return None
    return status.lag.backlog_rows if status.lag is not None else status.backlog_rows


def collect(cluster: Cluster, target: AutotuneTarget, status: QueryStatus | None,
            failure: str | None = None, *, stopped: bool = False, positions: QueryPositions | None = None) -> Facts:
    """The query's facts; `failure` is the text of a failure the caller saw before the status did (the runner,
    before it restarts the query, `stopped`: only then is the checkpoint's planned batch read); `positions`: the
    cycle's positions of the query, when it has them."""
    failure = failure or (status.exception if status is not None and status.failed else None)
    in_force = collect_tuning(cluster, target.tuning)
    lag = status.lag if status else None
    return Facts(
        query=target.query,
        mode=target.mode,
        max_rows_per_partition=in_force.max_rows_per_partition,
        max_bytes_per_partition=in_force.max_bytes_per_partition,
        dyn_batch_size=in_force.dyn_batch_size,
        batches=batches(status),
        reads_queue=target.tuning.source_document is not None,
        trigger_interval_seconds=status.trigger_interval_seconds if status else None,
        backlog_rows=backlog_rows(status, positions),
        time_to_drain_seconds=lag.time_to_drain_seconds if lag is not None else None,
        oom=status.oom if status else None,
        phases=status.phases if status else None,
        failure=failure,
        failed_run=None if failure is None else (status and status.run_id) or failure,
        uncommitted=uncommitted(cluster, target.replan) if failure is not None and stopped else None,
        write=read_write_stats(cluster, target.tuning.sink_document) if in_force.dyn_batch_size else None,
        dyn_batch_size_ceiling=dyn_batch_size_in_force(Tuning(dyn_batch_size=target.settings.max_dyn_batch_size),
                                                       target.settings.max_dyn_batch_size),
    )
