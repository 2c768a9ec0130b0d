"""OOM risk: per memory pool, a robust online fit `peak = base + k x batch bytes` and the next batch's risk.

Pure: the observations, the planned batch and the pools' limits come in as data; no cluster, no Spark, no clock
(the newest batch id stands in for time). Recent batches weigh more (a half-life in batches), outliers weigh
less (Huber weights, iteratively re-weighted, the scale from the residuals' median absolute deviation), and a
conservative prior stands in for what the observations cannot tell yet: before any observation both the base and
the slope come from the prior; while every observation has the same batch size the slope does. A batch that died
of a pool's memory is an observation too: its peak was at least the pool's limit.

Risk = predicted peak / the pool's limit: 1.0 means the next batch is predicted to run out of that pool. The
largest safe `max_rows_per_partition` is the cap under which a batch that fills every partition keeps the risk of
every pool under the target.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from opsd.observe.progress import PartitionOffsets
from streaming_core.offsets import batch_end

#: The memory pools opsd watches: the JVM heap, the JVM's direct memory, the Python workers.
POOLS = ("jvm_heap", "direct", "python_worker")
HEAP = POOLS[0]

#: Risk reported above this is capped: past "certainly out of memory" a bigger number tells nothing.
MAX_RISK = 10.0
_HUBER = 1.345  # the usual tuning constant: 95 % efficiency on normal residuals
_ITERATIONS = 10
_MIN_SPREAD = 0.05  # relative spread of batch sizes below which the slope cannot be fitted


@dataclass(frozen=True)
class Observation:
    """One batch as measured: its bytes read and the pool's peak; `failed` when it died of this pool's memory.
    `state_bytes`: what the query's state stores held then (heap only: the fit is of the peak without it)."""

    batch_id: int
    batch_bytes: float
    peak_bytes: float
    failed: bool = False
    state_bytes: float = 0.0


@dataclass(frozen=True)
class Prior:
    """What opsd assumes before it has seen a batch: a conservative base and memory per batch byte."""

    base_fraction: float = 0.3  # of the pool's limit, before the first observation
    bytes_per_batch_byte: float = 8.0  # a batch held as Java objects, Arrow buffers and pandas copies at once


@dataclass(frozen=True)
class ModelSettings:
    """How the fit weighs its observations."""

    half_life_batches: float = 20.0
    prior: Prior = Prior()


@dataclass(frozen=True)
class PeakModel:
    """`peak = base + slope x batch bytes` for one pool; `observations` = how many it was fitted from."""

    base: float
    slope: float
    observations: int

    def predict(self, batch_bytes: float) -> float:
        return self.base + self.slope * batch_bytes


@dataclass(frozen=True)
class PlannedBatch:
    """The next batch as the source will plan it: rows per partition under the cap, and bytes."""

    rows_per_partition: Mapping[tuple[str, int], int]  # (queue, partition) -> rows
    bytes_per_row: float
    max_rows_per_partition: int | None

    @property
    def rows(self) -> int:
        return sum(self.rows_per_partition.values())

    @property
    def bytes(self) -> float:
        return self.rows * self.bytes_per_row


@dataclass(frozen=True)
class PoolRisk:
    """One pool's verdict for the next batch; `observed_peak` is the last batch's (None when not measured)."""

    pool: str
    limit_bytes: float
    predicted_peak_bytes: float
    observed_peak_bytes: float | None
    model: PeakModel

    @property
    def risk(self) -> float:
        return min(MAX_RISK, max(0.0, self.predicted_peak_bytes / self.limit_bytes))


@dataclass(frozen=True)
class Evaluation:
    """A query's OOM risk for its next batch, per pool, and the cap that keeps every pool under the target."""

    query: str
    batch: PlannedBatch
    pools: tuple[PoolRisk, ...]
    target_risk: float
    safe_max_rows_per_partition: int | None  # None: no pool is limited, or no partition is known

    @property
    def risk(self) -> float:
        """The highest risk over the pools (0.0 when no pool has a limit)."""
        return max((p.risk for p in self.pools), default=0.0)


def planned_batch(partitions: Sequence[PartitionOffsets], cap: int | None, bytes_per_row: float) -> PlannedBatch:
    """The next batch by the source's rule `end_i = min(start_i + cap, upper_i)`, per queue, from where the last
    batch ended and the latest offsets it saw (partitions missing either are left out)."""
    rows: dict[tuple[str, int], int] = {}
    for queue in {p.queue for p in partitions}:
        known = [p for p in partitions if p.queue == queue and p.end is not None and p.latest is not None]
        start = {p.partition: p.end for p in known}
        end = batch_end(start, {p.partition: p.latest for p in known}, cap)
        rows.update({(queue, i): end[i] - start[i] for i in start})
    return PlannedBatch(rows, bytes_per_row, cap)


def fit(observations: Sequence[Observation], limit_bytes: float, settings: ModelSettings = ModelSettings()
        ) -> PeakModel:
    """The pool's model from its observations (module docstring); the prior alone when there are none."""
    prior = settings.prior
    if not observations:
        return PeakModel(prior.base_fraction * limit_bytes, prior.bytes_per_batch_byte, 0)
    newest = max(o.batch_id for o in observations)
    recency = [0.5 ** ((newest - o.batch_id) / settings.half_life_batches) for o in observations]
    x = [o.batch_bytes for o in observations]
    y = [(max(o.peak_bytes, limit_bytes) if o.failed else o.peak_bytes) - o.state_bytes for o in observations]
    if max(x) - min(x) <= _MIN_SPREAD * max(max(x), 1.0):
        slope = prior.bytes_per_batch_byte
        base = _weighted_median([yi - slope * xi for xi, yi in zip(x, y, strict=True)], recency)
        return PeakModel(base, slope, len(observations))
    base, slope = _huber_line(x, y, recency)
    return PeakModel(base, max(0.0, slope), len(observations))


def evaluate(query: str, batch: PlannedBatch, limits: Mapping[str, float],
             observations: Mapping[str, Sequence[Observation]], target_risk: float = 0.7,
             settings: ModelSettings = ModelSettings(), state_bytes: float = 0.0) -> Evaluation:
    """Risk per pool with a limit (`limits`: pool -> bytes) for the planned batch, and the safe cap.

    `state_bytes` is what the query's state stores hold now (`memoryUsedBytes` of its stateful operators): the
    HDFS state store lives in the heap, so it adds to the heap's predicted peak whatever the batch's size.
    """
    pools = []
    for pool in POOLS:
        limit = limits.get(pool)
        if not limit:
            continue
        seen = observations.get(pool, ())
        model = fit(seen, limit, settings)
        if pool == HEAP:
            model = replace(model, base=model.base + state_bytes)
        last = max(seen, key=lambda o: o.batch_id, default=None)
        pools.append(PoolRisk(pool, limit, model.predict(batch.bytes), None if last is None else last.peak_bytes,
                              model))
    cap = safe_max_rows_per_partition(pools, len(batch.rows_per_partition), batch.bytes_per_row, target_risk)
    return Evaluation(query, batch, tuple(pools), target_risk, cap)


def safe_max_rows_per_partition(pools: Iterable[PoolRisk], partitions: int, bytes_per_row: float,
                                target_risk: float) -> int | None:
    """The largest cap whose full batch (every partition at the cap) keeps each pool's risk <= target; 0 when even
    an empty batch is over it; None when no pool has a slope or no partition is known."""
    if partitions <= 0 or bytes_per_row <= 0:
        return None
    caps = []
    for pool in pools:
        if pool.model.slope <= 0:
            continue
        allowed_bytes = target_risk * pool.limit_bytes - pool.model.base
        caps.append(max(0, math.floor(allowed_bytes / (pool.model.slope * bytes_per_row * partitions))))
    return min(caps, default=None)


def finding(evaluation: Evaluation) -> str | None:
    """`opsd doctor`'s advice when the next batch's risk is over the target; None when it is not."""
    over = [p for p in evaluation.pools if p.risk > evaluation.target_risk]
    if not over:
        return None
    worst = max(over, key=lambda p: p.risk)
    cap = evaluation.safe_max_rows_per_partition
    advice = (f"set max_rows_per_partition <= {cap} (now {evaluation.batch.max_rows_per_partition})"
              if cap else f"give the {worst.pool} pool more memory: even a small batch is over the target")
    return (f"query {evaluation.query}: next batch ({evaluation.batch.rows} rows, {evaluation.batch.bytes:.0f} "
            f"bytes) is predicted to peak at {worst.predicted_peak_bytes:.0f} bytes of {worst.pool} "
            f"(limit {worst.limit_bytes:.0f}, risk {worst.risk:.2f} > {evaluation.target_risk}); {advice}")


def _weighted_median(values: Sequence[float], weights: Sequence[float]) -> float:
    pairs = sorted(zip(values, weights, strict=True))
    half, running = sum(weights) / 2, 0.0
    for value, weight in pairs:
        running += weight
        if running >= half:
            return value
    return pairs[-1][0]


def _huber_line(x: Sequence[float], y: Sequence[float], recency: Sequence[float]) -> tuple[float, float]:
    """Weighted least squares re-weighted by Huber's rule (IRLS): base and slope."""
    robust = [1.0] * len(x)
    base = slope = 0.0
    for _ in range(_ITERATIONS):
        w = [r * h for r, h in zip(recency, robust, strict=True)]
        total = sum(w)
        mx = sum(wi * xi for wi, xi in zip(w, x, strict=True)) / total
        my = sum(wi * yi for wi, yi in zip(w, y, strict=True)) / total
        sxx = sum(wi * (xi - mx) ** 2 for wi, xi in zip(w, x, strict=True))
        if sxx <= 0:
            break
        slope = sum(wi * (xi - mx) * (yi - my) for wi, xi, yi in zip(w, x, y, strict=True)) / sxx
        base = my - slope * mx
        residuals = [yi - base - slope * xi for xi, yi in zip(x, y, strict=True)]
        scale = 1.4826 * _weighted_median([abs(r) for r in residuals], recency)
        if scale <= 0:
            break
        robust = [min(1.0, _HUBER * scale / abs(r)) if r else 1.0 for r in residuals]
    return base, slope
