"""The scheduled OOM check: collect (stage facts, the memory sampler's window where it runs, bytes per row, the last
batch's offsets and the cap in force) -> evaluate (the per-pool envelope and the next batch's risk) -> record
(metrics, `/status`). It decides nothing: the safe cap it exports is for the tuner and `opsd doctor`.

The check is the online part of the model: it keeps, per query and pool, the observations of the batches it
saw (a bounded history; the fit weighs recent ones more), one per batch id, plus one failed observation for each
failure whose cause is memory. The sampler (`opsd.checks.oom.sampler`, local mode only) measures the Python workers
and direct memory the way their limits hold; without it those pools are measured by Spark's executor metrics.

It also judges a query the runner is about to start (`before_start`, called before the auto-tuner's): a query that
ran before from its last batch (after a memory failure, with that failure observed first), one that never read
from where its consumer stands and the rows ahead of it (the prior alone: no batch measured yet). So the tuner
caps the first batch of a run by the model, not by a fixed guess.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import structlog

from opsd.checks.oom.collect import (
    RowSizes,
    SparkRest,
    batch_usage,
    execution_region,
    next_partitions,
    pool_limits,
    sample_row_sizes,
    stage_facts,
)
from opsd.checks.oom.evaluate import (
    DIRECT,
    POOLS,
    PYTHON_WORKER,
    Evaluation,
    ModelSettings,
    Observation,
    evaluate,
    observations_of,
    planned_batch,
)
from opsd.checks.oom.sampler import MemorySampler
from opsd.checks.tuning.collect import collect as collect_tuning
from opsd.checks.tuning.collect import sources_for
from opsd.collect.positions import PositionsCollector, Reading
from opsd.config.models import OpsdConfig
from opsd.observe.failures import memory_pool
from opsd.observe.progress import PartitionOffsets
from opsd.observe.recorder import Recorder
from opsd.observe.status import QueryStatus
from opsd.results.oom import MeasuredBy, OomVerdict, PoolVerdict
from streaming_core.cluster import Cluster, ClusterError, connect
from streaming_core.options import CONSUMER_PATH

log = structlog.get_logger(__name__)

Stages = list[dict[str, Any]]

#: Observations kept per query and pool; with the default half-life older ones weigh < 0.1 %.
HISTORY = 200
#: Seconds added to a batch's window: executor metrics arrive with heartbeats, a stage may start a bit late.
WINDOW_SLACK_SECONDS = 1.0
#: The pools the memory sampler measures when it runs, and how `/status` names each pool's measure.
SAMPLED_POOLS = (PYTHON_WORKER, DIRECT)
MEASURES = {True: MeasuredBy.SAMPLER, False: MeasuredBy.SPARK_METRICS}


@dataclass
class _QueryMemory:
    """What the check remembers of one query between runs."""

    observations: dict[str, deque[Observation]] = field(
        default_factory=lambda: {pool: deque(maxlen=HISTORY) for pool in POOLS})
    last_batch_id: int | None = None
    #: The failed run (its run id, else its termination time or text) last observed: a failure is observed once.
    last_failed_run: str | float | None = None
    last_evaluation: Evaluation | None = None
    #: Sizes per row of the rows the last batch read, and those rows (a new batch's rows are sampled again).
    row_sizes: tuple[tuple[PartitionOffsets, ...], RowSizes | None] | None = None


class OomCheck:
    """The OOM risk of every query's next batch (`opsd.checks.registry` builds it); `before_start` for the runner."""

    name = "oom"

    def __init__(self, recorder: Recorder, positions: PositionsCollector, config: OpsdConfig, rest: SparkRest,
                 spark_conf: Mapping[str, str], sampler: MemorySampler | None = None) -> None:
        """`positions`: the cycle's positions (the trimmed row counts of the queues whose rows are sampled);
        `spark_conf`: the session's conf in force (`spark.sparkContext.getConf().getAll()`), for the limits;
        `sampler`: the running memory sampler of a local-mode session (None elsewhere)."""
        self.recorder = recorder
        self.positions = positions
        self.rest = rest
        self.sampler = sampler
        master = spark_conf.get("spark.master", config.spark.master)
        self.limits = pool_limits(spark_conf, master)
        self.execution_region = execution_region(spark_conf, master)
        self.target_risk = config.checks.oom_risk_target
        self.settings = ModelSettings(half_life_batches=config.checks.oom_half_life_batches,
                                      confidence=config.checks.oom_confidence)
        conf = dict(config.spark.conf)
        self.sources = {p.name: (p.source.path, p.source.options[CONSUMER_PATH], sources_for(p, conf))
                        for p in config.pipelines if p.source.format == "yt" and p.source.options.get(CONSUMER_PATH)}
        self._lock = threading.Lock()  # the scheduler's runs and the runner's before_start share the memory
        self.memory: dict[str, _QueryMemory] = {}

    def run(self) -> dict[str, Evaluation]:
        """Evaluate every query that read a yt queue; returns the evaluations for logs, tests and doctor."""
        queries = {name: s for name, s in self.recorder.status.snapshot().items() if s.partitions}
        return self.evaluate(self.positions.read(), queries) if queries else {}

    def evaluate(self, reading: Reading, queries: Mapping[str, QueryStatus] | None = None) -> dict[str, Evaluation]:
        """Evaluate `queries` (default: every query of the status that read a yt queue) with the reading's positions."""
        if queries is None:
            queries = {name: s for name, s in self.recorder.status.snapshot().items() if s.partitions}
        if not queries:
            return {}
        with self._lock:
            stages = self.rest.stages()
            found = {}
            with connect(self.positions.cluster_uri) as cluster:
                for name, status in queries.items():
                    sizes = self._row_sizes(cluster, status, reading)
                    if sizes is None:
                        continue
                    found[name] = self._evaluate(status, sizes, stages)
            return found

    def _row_sizes(self, cluster: Cluster, status: QueryStatus, reading: Reading) -> RowSizes | None:
        """Sizes per row of the rows the query's last batch read: sampled once per batch (the rows do not change)."""
        memory = self.memory.setdefault(status.name, _QueryMemory())
        if memory.row_sizes is None or memory.row_sizes[0] != status.partitions:
            positions = reading.of(status.name)
            sampled = sample_row_sizes(cluster, status.partitions, trimmed=positions.trimmed() if positions else None)
            memory.row_sizes = (status.partitions, sampled)
        return memory.row_sizes[1]

    def before_start(self, query: str, failure: str | None = None) -> Evaluation | None:
        """The verdict for the first batch of a run the runner is about to start (`failure`: why the last run
        ended, which the status may not hold yet: a memory failure is observed first, once); None for a query that
        reads no yt queue or has nothing to measure its rows by. A failure to judge is logged: the start goes on."""
        with self._lock:
            status = self.recorder.status.get(query) or QueryStatus(name=query)
            if failure is not None and not status.failed:
                status = replace(status, exception=failure)
            try:
                return self._before_start(status)
            except (ClusterError, OSError, ValueError) as e:
                log.warning("oom_before_start_failed", query=query, error=f"{type(e).__name__}: {e}")
                return None

    def _before_start(self, status: QueryStatus) -> Evaluation | None:
        with connect(self.positions.cluster_uri) as cluster:
            if status.partitions:  # it ran: the next batch starts where the last one ended
                sizes = sample_row_sizes(cluster, status.partitions)
                stages = self.rest.stages() if sizes is not None else []
            elif status.name in self.sources:  # it never read: from its consumer, with the rows ahead of it
                queue, consumer, tuning = self.sources[status.name]
                partitions = next_partitions(cluster, queue, consumer)
                sizes = sample_row_sizes(cluster, partitions, ahead=True)
                caps = collect_tuning(cluster, tuning)  # the caps its first batch is planned by
                status, stages = replace(status, partitions=tuple(partitions),
                                         max_rows_per_partition=caps.max_rows_per_partition,
                                         max_bytes_per_partition=caps.max_bytes_per_partition), []
            else:
                return None
        return None if sizes is None else self._evaluate(status, sizes, stages)

    def _evaluate(self, status: QueryStatus, sizes: RowSizes, stages: Stages) -> Evaluation:
        memory = self.memory.setdefault(status.name, _QueryMemory())
        bytes_per_row = sizes.arrow_bytes
        self._observe_batch(status, memory, bytes_per_row, stages)
        self._observe_failure(status, memory)
        batch = planned_batch(status.partitions, status.max_rows_per_partition, bytes_per_row,
                              status.max_bytes_per_partition, sizes.arrow_per_weight)
        state = status.last_progress.state_memory_bytes if status.last_progress else 0
        result = evaluate(status.name, batch, self.limits, memory.observations, self.target_risk, self.settings,
                          state_bytes=state, baselines=self.sampler.idle() if self.sampler else None,
                          execution_region_bytes=self.execution_region)
        memory.last_evaluation = result
        for pool in result.pools:
            self.recorder.record_oom_pool(status.name, pool.pool, risk=pool.risk,
                                          predicted_peak_bytes=pool.predicted_peak_bytes,
                                          peak_bound_bytes=pool.peak_bound_bytes,
                                          exceed_probability=pool.exceed_probability,
                                          limit_bytes=pool.limit_bytes, observed_peak_bytes=pool.observed_peak_bytes)
        self.recorder.record_oom(status.name, verdict(result, sampled=self.sampler is not None),
                                 target_risk=self.target_risk)
        return result

    def _observe_batch(self, status: QueryStatus, memory: _QueryMemory, bytes_per_row: float, stages: Stages
                       ) -> None:
        """One observation per pool for a batch not seen yet, from the stages submitted while it ran."""
        batch = status.last_progress
        if batch is None or batch.timestamp is None or batch.batch_id == memory.last_batch_id:
            return
        memory.last_batch_id = batch.batch_id
        rows = batch.num_input_rows
        if rows <= 0:
            return
        started, duration = batch.timestamp, batch.duration_seconds or 0.0
        start, end = started - WINDOW_SLACK_SECONDS, started + duration + WINDOW_SLACK_SECONDS
        usage = batch_usage(stage_facts(stages, start, end), self.sampler.window(start, end) if self.sampler else None)
        for pool, observation in observations_of(batch.batch_id, rows * bytes_per_row, usage,
                                                 batch.state_memory_bytes).items():
            memory.observations[pool].append(observation)

    def _observe_failure(self, status: QueryStatus, memory: _QueryMemory) -> None:
        """A new failure whose cause is memory: the batch that was planned died at the pool's limit."""
        pool = memory_pool(status.exception)
        run = status.run_id or status.terminated_at or status.exception
        if pool is None or run == memory.last_failed_run:
            return
        memory.last_failed_run = run
        self.recorder.record_memory_failure(status.name, pool)
        planned = memory.last_evaluation
        if planned is not None and pool in memory.observations:
            batch_id = (status.last_batch_id if status.last_batch_id is not None else -1) + 1
            judged = next((p for p in planned.pools if p.pool == pool), None)
            memory.observations[pool].append(Observation(
                batch_id, planned.batch.bytes, 0.0, failed=True,
                baseline_bytes=judged.baseline_bytes if judged is not None else 0.0))


def verdict(evaluation: Evaluation, *, sampled: bool) -> OomVerdict:
    """The verdict the status keeps: per pool the expected peak, its interval at the confidence, the probability it
    passes the limit, the baseline, the measure and how many batches the fit saw."""
    return OomVerdict(
        risk=evaluation.risk, confidence=evaluation.confidence, exceed_probability=evaluation.exceed_probability,
        batch_bytes=evaluation.batch.bytes, safe_max_rows_per_partition=evaluation.safe_max_rows_per_partition,
        safe_max_bytes_per_partition=evaluation.safe_max_bytes_per_partition,
        pools=tuple(PoolVerdict(
            pool=p.pool, risk=p.risk, predicted_peak_bytes=p.predicted_peak_bytes,
            peak_interval_bytes=(p.peak_low_bytes, p.peak_bound_bytes), exceed_probability=p.exceed_probability,
            limit_bytes=p.limit_bytes, baseline_bytes=p.baseline_bytes, observed_peak_bytes=p.observed_peak_bytes,
            observations=p.model.observations, measured_by=MEASURES[sampled and p.pool in SAMPLED_POOLS],
        ) for p in evaluation.pools),
    )
