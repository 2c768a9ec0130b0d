"""OOM risk: per memory pool, an envelope of the next batch's peak, fitted online from the batches measured.

Pure: the observations, the planned batch and the pools' limits come in as data; no cluster, no Spark, no clock
(the newest batch id stands in for time).

The model, per pool: peak = baseline + growth (+ Spark's execution memory, heap only), where
- the baseline is what the pool held before the batch and holds now (measured where the sampler can: an idle
  Python worker's imported libraries, Netty's pooled chunks; else 0 and the fit's base takes it);
- growth = base + slope x batch bytes, a Bayesian linear fit: a per-pool prior (a conservative base and bytes per
  batch byte) updated by the observations, recent batches weighing more (a half-life in batches), with the noise
  of a batch's peak about the line estimated from the residuals (pooled with a prior noise). The prediction is a
  distribution, not a point: its spread is the noise plus the fit's own uncertainty at the planned size, so noisy
  peaks (a heap peak depends on when the collector ran) and extrapolation widen the envelope instead of pulling
  the prediction down;
- a pool need not grow on a line (direct memory holds a few of the source's bounded Arrow chunks at a time whatever
  the batch; a sort spills once its buffers are full; a buffer may fill before anything grows): beside the line, for
  each size the pool was seen at (below the largest, the last `_MAX_KNEES`), the hypothesis that the growth levels
  off there, growth = base + slope x min(batch bytes, that size), and the one that it only starts there, base +
  slope x max(0, batch bytes - that size), each fitted the same way with one noise (the best-explaining
  hypothesis'). Each weighs by its prior (`ModelSettings.level_prior` shared by the levels, the rest by the growing
  ones) times how well it explains the observations (its marginal likelihood), and the prediction is their mixture.
  A level takes over only with evidence, batches past it that did not grow; without it the growing hypotheses' upper
  tail sets the bound, and a late, steep growth is not averaged away by the flat part before it. A pool that died of
  a batch has no level: every growing hypothesis is raised to reach the limit at that size;
- Spark's execution memory (heap: sort, aggregation and join buffers) is predicted apart: it grows with the batch
  at the highest ratio seen in batches that did not spill, and stops at Spark's execution region (the memory
  manager grants no more: the operator spills);
- a batch that died of the pool needed its limit at least: the slope is raised until the line reaches the limit
  at that batch's size (the failure is blamed on the size), and any batch as large is predicted at the limit at
  least.

The envelope is the upper bound of the peak at `confidence` (one-sided, the mixture's quantile); risk = that bound /
the pool's limit, so
1.0 means the next batch may run out of the pool with probability 1 - confidence or more. `exceed_probability` is
the model's probability that the peak passes the limit. Before any observation the prior alone predicts, a
conservative point guess with the prior noise only. The largest safe `max_rows_per_partition` is the cap under
which a batch that fills every partition keeps every pool's bound under the target, at the bytes per row of the rows
read last; the largest safe `max_bytes_per_partition` is the same bound in bytes, which holds whatever the rows'
width: rows that grow 10x wide make the row cap 10x too large, never the byte cap. The planned batch honours both
caps, as the source does (`streaming_core.admission`). The model counts Arrow bytes; the byte cap counts YTsaurus'
data weight, so the sample's ratio of the two converts one into the other.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from statistics import NormalDist

from opsd.config.thresholds import OOM_CONFIDENCE, OOM_HALF_LIFE_BATCHES, OOM_RISK_TARGET
from opsd.observe.progress import PartitionOffsets
from streaming_core.offsets import batch_end

#: The memory pools opsd watches: the JVM heap, the JVM's direct memory, a Python worker, the driver's results.
POOLS = ("jvm_heap", "direct", "python_worker", "driver_result")
HEAP, DIRECT, PYTHON_WORKER, DRIVER_RESULT = POOLS

#: Risk reported above this is capped: past "certainly out of memory" a bigger number tells nothing.
MAX_RISK = 10.0
_FIT_ROUNDS = 4  # the noise and the line are estimated in turn; they settle in a few rounds
#: The prior base's standard deviation, in units of the pool's limit: weak, so that batches of one size lift the
#: base to their level and leave the slope to the prior (and a local fit's base is free).
_BASE_SPREAD = 1.0
_NORMAL = NormalDist()
#: Sizes a pool may level off or start to grow at that the fit weighs (the largest seen below the largest batch):
#: bounds its cost.
_MAX_KNEES = 4
#: Steps of a mixture's quantile (Newton's, each at least a bisection's) and of the largest safe batch (bisection).
_QUANTILE_ROUNDS, _SEARCH_ROUNDS = 60, 40
_QUANTILE_TOLERANCE = 1e-6
#: A hypothesis weighing less than this moves no quantile the model reports: left out of the peak's distribution.
_NEGLIGIBLE = 1e-6


@dataclass(frozen=True)
class PoolUsage:
    """One pool over one batch as measured: its peak, what it held before the batch, and whether the sampler (the
    limit's own measure) or Spark's executor metrics measured it."""

    peak_bytes: float
    baseline_bytes: float = 0.0
    sampled: bool = False


@dataclass(frozen=True)
class BatchUsage:
    """One batch as measured: per pool, and Spark's execution memory at its highest and whether the batch spilled."""

    pools: Mapping[str, PoolUsage] = field(default_factory=dict)
    execution_bytes: float = 0.0
    spilled: bool = False


@dataclass(frozen=True)
class Observation:
    """One batch in one pool: its bytes read and the pool's peak; `failed` when it died of this pool's memory.
    `baseline_bytes`: what the pool held before the batch; `state_bytes`: what the query's state stores held then;
    `execution_bytes`, `spilled`: Spark's execution memory at its highest and whether it spilled (heap only)."""

    batch_id: int
    batch_bytes: float
    peak_bytes: float
    failed: bool = False
    state_bytes: float = 0.0
    baseline_bytes: float = 0.0
    execution_bytes: float = 0.0
    spilled: bool = False


@dataclass(frozen=True)
class Prior:
    """What opsd assumes of a pool before it has seen a batch: the growth's base (a fraction of the pool's headroom
    above its baseline), memory per batch byte (give or take `ModelSettings.slope_spread` of it), and how far a
    batch's peak strays from the line (a fraction of the pool's limit) until the residuals tell."""

    base_fraction: float
    bytes_per_batch_byte: float
    noise_fraction: float = 0.05


@dataclass(frozen=True)
class ModelSettings:
    """How the model weighs its observations and how sure its bound is."""

    half_life_batches: float = OOM_HALF_LIFE_BATCHES
    #: One-sided level of the peak's upper bound that risk is judged by.
    confidence: float = OOM_CONFIDENCE
    #: The slope's prior standard deviation, as a fraction of the prior slope: how soon the batches' own growth
    #: outweighs the prior (their spread in size must lift the growth out of the noise first).
    slope_spread: float = 0.25
    #: How many observations the prior noise weighs as.
    noise_weight: float = 2.0
    #: The prior probability that a pool levels off at one of the sizes it was seen at (shared by them); the rest is
    #: shared by the line and the sizes it may start to grow at. This and `slope_spread` are the first row of
    #: `python -m bench.oom_risk --sweep` on the tune half of the recordings (`bench/recordings/oom_risk-sweep.txt`).
    level_prior: float = 0.5
    #: A batch held as Java objects and copies (heap: its peaks depend on when the collector ran, the noisiest), as
    #: Arrow buffers (direct: at most a partition's bytes at once), as pandas copies (a Python worker), serialized
    #: once (results: exact sizes); direct memory and results start near empty.
    heap: Prior = Prior(0.3, 4.0, noise_fraction=0.075)
    direct: Prior = Prior(0.1, 0.5, noise_fraction=0.025)
    python_worker: Prior = Prior(0.3, 2.0, noise_fraction=0.015)
    driver_result: Prior = Prior(0.0, 0.75, noise_fraction=0.005)

    def prior(self, pool: str) -> Prior:
        return {HEAP: self.heap, DIRECT: self.direct, PYTHON_WORKER: self.python_worker,
                DRIVER_RESULT: self.driver_result}[pool]

    @property
    def z(self) -> float:
        """Standard deviations from the mean to the bound."""
        return _NORMAL.inv_cdf(self.confidence)


@dataclass(frozen=True)
class Growth:
    """One hypothesis of a pool's growth: base + slope x batch bytes (a line), or x min(batch bytes, `levels_at`)
    (it levels off), or x max(0, batch bytes - `rises_at`) (it grows only past that size), with its fit's
    uncertainty: `noise` (sd of one batch's peak about it) and `covariance` = (var base, cov, var slope); `weight`:
    its posterior probability among the pool's hypotheses."""

    base: float
    slope: float
    noise: float = 0.0
    covariance: tuple[float, float, float] = (0.0, 0.0, 0.0)
    weight: float = 1.0
    levels_at: float | None = None
    rises_at: float | None = None

    def x(self, batch_bytes: float) -> float:
        """What the slope multiplies at `batch_bytes`."""
        return _knee(batch_bytes, self.levels_at, self.rises_at)

    def mean(self, batch_bytes: float) -> float:
        return self.base + self.slope * self.x(batch_bytes)

    def spread(self, batch_bytes: float) -> float:
        """Standard deviation of a batch's peak: the noise and the fit's uncertainty at `batch_bytes`."""
        x = self.x(batch_bytes)
        var_base, cov, var_slope = self.covariance
        return math.sqrt(self.noise ** 2 + max(0.0, var_base + 2 * x * cov + x ** 2 * var_slope))


@dataclass(frozen=True)
class PeakModel:
    """growth = the mixture of `growths` (+ execution memory: min(execution_ratio x bytes, execution_cap));
    `died_at_bytes`: the smallest batch that died of the pool. `observations`: how many it was fitted from."""

    growths: tuple[Growth, ...]
    observations: int
    execution_ratio: float = 0.0
    execution_cap: float | None = None
    died_at_bytes: float | None = None

    @property
    def line(self) -> Growth:
        """The hypothesis that the pool keeps growing (never levels off)."""
        return next(g for g in self.growths if g.levels_at is None and g.rises_at is None)

    def execution(self, batch_bytes: float) -> float:
        execution = self.execution_ratio * batch_bytes
        return execution if self.execution_cap is None else min(execution, self.execution_cap)

    def predict(self, batch_bytes: float) -> float:
        """The expected growth of a batch of `batch_bytes` above the pool's baseline."""
        return sum(g.weight * g.mean(batch_bytes) for g in self.growths) + self.execution(batch_bytes)

    def dies(self, batch_bytes: float) -> bool:
        return self.died_at_bytes is not None and batch_bytes >= self.died_at_bytes

    def peak(self, batch_bytes: float, floor: float, limit: float) -> tuple[tuple[float, float, float], ...]:
        """The peak's distribution: (weight, mean, sd) per hypothesis, standing on `floor`; a batch as large as one
        that died is at the pool's `limit` at least."""
        execution = self.execution(batch_bytes)
        found = []
        for g in self.growths:
            if g.weight < _NEGLIGIBLE:
                continue
            mean = floor + g.mean(batch_bytes) + execution
            found.append((g.weight, max(mean, limit) if self.dies(batch_bytes) else mean, g.spread(batch_bytes)))
        return tuple(found)


@dataclass(frozen=True)
class PlannedBatch:
    """The next batch as the source will plan it: rows per partition under the row cap, and bytes (Arrow) under the
    byte cap (data weight, `arrow_per_weight` Arrow bytes each)."""

    rows_per_partition: Mapping[tuple[str, int], int]  # (queue, partition) -> rows
    bytes_per_row: float
    max_rows_per_partition: int | None
    max_bytes_per_partition: int | None = None
    arrow_per_weight: float = 1.0

    @property
    def rows(self) -> int:
        return sum(self.rows_per_partition.values())

    @property
    def bytes(self) -> float:
        return sum(self.partition_bytes(rows) for rows in self.rows_per_partition.values())

    def partition_bytes(self, rows: int) -> float:
        """Arrow bytes of a partition's `rows` under the byte cap (a row wider than the cap is read alone)."""
        planned = rows * self.bytes_per_row
        if self.max_bytes_per_partition is None or rows == 0:
            return planned
        return min(planned, max(self.bytes_per_row, self.max_bytes_per_partition * self.arrow_per_weight))


@dataclass(frozen=True)
class PoolRisk:
    """One pool's verdict for the next batch: the expected peak, its interval at the evaluation's confidence
    (`peak_low_bytes`..`peak_bound_bytes`), the probability it passes the limit, the baseline it stands on;
    `observed_peak_bytes` is the last batch's (None when not measured)."""

    pool: str
    limit_bytes: float
    predicted_peak_bytes: float
    observed_peak_bytes: float | None
    model: PeakModel
    peak_bound_bytes: float = 0.0
    peak_low_bytes: float = 0.0
    exceed_probability: float = 0.0
    baseline_bytes: float = 0.0

    @property
    def risk(self) -> float:
        """The peak's upper bound over the limit."""
        return min(MAX_RISK, max(0.0, self.peak_bound_bytes / self.limit_bytes))

    def bound_at(self, batch_bytes: float, confidence: float) -> float:
        """The peak's upper bound at `confidence` for a batch of `batch_bytes` (what the safe cap is found by)."""
        return quantile(self.model.peak(batch_bytes, self.baseline_bytes, self.limit_bytes), confidence)


@dataclass(frozen=True)
class Evaluation:
    """A query's OOM risk for its next batch, per pool, and the cap that keeps every pool under the target."""

    query: str
    batch: PlannedBatch
    pools: tuple[PoolRisk, ...]
    target_risk: float
    safe_max_rows_per_partition: int | None  # None: no pool is limited, or no partition is known
    confidence: float = ModelSettings.confidence
    #: The byte cap (data weight) with the same bound; None as the row cap.
    safe_max_bytes_per_partition: int | None = None

    @property
    def risk(self) -> float:
        """The highest risk over the pools (0.0 when no pool has a limit)."""
        return max((p.risk for p in self.pools), default=0.0)

    @property
    def exceed_probability(self) -> float:
        """The highest probability over the pools that the next batch passes a limit."""
        return max((p.exceed_probability for p in self.pools), default=0.0)


def planned_batch(partitions: Sequence[PartitionOffsets], cap: int | None, bytes_per_row: float,
                  max_bytes: int | None = None, arrow_per_weight: float = 1.0) -> PlannedBatch:
    """The next batch by the source's rule `end_i = min(start_i + cap, upper_i)`, per queue, from where the last
    batch ended and the latest offsets it saw (partitions missing either are left out), each partition's bytes under
    the byte cap `max_bytes` (data weight)."""
    rows: dict[tuple[str, int], int] = {}
    for queue in {p.queue for p in partitions}:
        known = [p for p in partitions if p.queue == queue and p.end is not None and p.latest is not None]
        start = {p.partition: p.end for p in known}
        end = batch_end(start, {p.partition: p.latest for p in known}, cap)
        rows.update({(queue, i): end[i] - start[i] for i in start})
    return PlannedBatch(rows, bytes_per_row, cap, max_bytes, arrow_per_weight)


def observations_of(batch_id: int, batch_bytes: float, usage: BatchUsage, state_bytes: float = 0.0
                    ) -> dict[str, Observation]:
    """One observation per pool a batch's usage measured (the state stores and execution memory are the heap's)."""
    found = {}
    for pool, seen in usage.pools.items():
        heap = pool == HEAP
        found[pool] = Observation(batch_id, batch_bytes, seen.peak_bytes, state_bytes=state_bytes if heap else 0.0,
                                  baseline_bytes=seen.baseline_bytes,
                                  execution_bytes=usage.execution_bytes if heap else 0.0,
                                  spilled=usage.spilled and heap)
    return found


def fit(observations: Sequence[Observation], limit_bytes: float, settings: ModelSettings = ModelSettings(),
        pool: str = HEAP, baseline_bytes: float = 0.0, execution_region_bytes: float | None = None) -> PeakModel:
    """The pool's model from its observations (module docstring); the prior alone when there are none.
    `baseline_bytes`: what the pool holds now (the prior's base is a fraction of the headroom above it);
    `execution_region_bytes`: the most execution memory Spark's memory manager grants (heap)."""
    prior = settings.prior(pool)
    prior_base = prior.base_fraction * max(0.0, limit_bytes - baseline_bytes)
    measured = [o for o in observations if not o.failed]
    died = [o for o in observations if o.failed]
    if measured:
        sizes = sorted({o.batch_bytes for o in measured})[:-1][-_MAX_KNEES:]
        levels = () if died else tuple((size, None) for size in sizes)
        knees = [(None, None), *((None, size) for size in sizes), *levels]
        fitted = [_fit_line(measured, limit_bytes, settings, prior, prior_base, *knee) for knee in knees]
        noise_variance = max(fitted, key=lambda f: f[-1])[2]  # of the hypothesis that explains them best
        fitted = [_fit_line(measured, limit_bytes, settings, prior, prior_base, *knee, noise_variance)
                  for knee in knees]
        grows = (1 - settings.level_prior) / (len(knees) - len(levels)) if levels else 1 / len(knees)
        priors = [settings.level_prior / len(levels) if levels_at is not None else grows for levels_at, _ in knees]
        top = max(f[-1] for f in fitted)
        weights = [p * math.exp(f[-1] - top) for p, f in zip(priors, fitted, strict=True)]
        growths = [_in_bytes(a, k, s2, cov, limit_bytes, w / sum(weights), *knee)
                   for (a, k, s2, cov, _), w, knee in zip(fitted, weights, knees, strict=True)]
    else:
        growths = [Growth(prior_base, prior.bytes_per_batch_byte, prior.noise_fraction * limit_bytes)]
    for o in died:  # it needed the pool's limit at least: the growth per byte was higher than the lines say
        need = _growth(o, limit_bytes)
        growths = [replace(g, slope=(need - g.base) / g.x(o.batch_bytes)) if g.x(o.batch_bytes) > 0 and
                   g.mean(o.batch_bytes) < need else g for g in growths]
    ratio, cap = _execution(measured, execution_region_bytes if pool == HEAP else None)
    return PeakModel(tuple(growths), len(observations), ratio, cap, min((o.batch_bytes for o in died), default=None))


def _in_bytes(a: float, k: float, s2: float, cov: tuple[float, float, float], limit_bytes: float, weight: float,
              levels_at: float | None, rises_at: float | None) -> Growth:
    """A hypothesis fitted in units of the limit (base, noise variance, covariance), in bytes."""
    return Growth(a * limit_bytes, k, math.sqrt(s2) * limit_bytes,
                  (cov[0] * limit_bytes ** 2, cov[1] * limit_bytes, cov[2]), weight, levels_at, rises_at)


def _knee(batch_bytes: float, levels_at: float | None, rises_at: float | None) -> float:
    """What a hypothesis' slope multiplies: the batch's bytes, up to where it levels off, past where it rises."""
    if levels_at is not None:
        return min(batch_bytes, levels_at)
    return batch_bytes if rises_at is None else max(0.0, batch_bytes - rises_at)


def _fit_line(measured: Sequence[Observation], limit_bytes: float, settings: ModelSettings, prior: Prior,
              prior_base: float, levels_at: float | None, rises_at: float | None,
              noise_variance: float | None = None) -> tuple[float, float, float, tuple[float, float, float], float]:
    """The posterior line of the measured batches' growth against `_knee(batch bytes)`, in units of the
    limit (the normal equations stay well conditioned; the slope is bytes per byte either way): base, slope, noise
    variance (estimated from the residuals pooled with the prior's, unless given), (var base, cov, var slope), and
    the log of its marginal likelihood (how well it explains them)."""
    newest = max(o.batch_id for o in measured)
    weights = [0.5 ** ((newest - o.batch_id) / settings.half_life_batches) for o in measured]
    x = [_knee(o.batch_bytes, levels_at, rises_at) / limit_bytes for o in measured]
    y = [_growth(o, limit_bytes) / limit_bytes for o in measured]
    noise_fraction = prior.noise_fraction
    mean0 = (prior_base / limit_bytes, prior.bytes_per_batch_byte)
    precision0 = (1.0 / _BASE_SPREAD ** 2, 1.0 / max(settings.slope_spread * prior.bytes_per_batch_byte, 1e-3) ** 2)
    s2 = noise_fraction ** 2 if noise_variance is None else noise_variance
    for _ in range(_FIT_ROUNDS if noise_variance is None else 0):
        (a, k), cov = _posterior(x, y, weights, mean0, precision0, s2)
        squares = sum(w * (yi - a - k * xi) ** 2 for w, xi, yi in zip(weights, x, y, strict=True))
        s2 = (settings.noise_weight * noise_fraction ** 2 + squares) / (settings.noise_weight + sum(weights))
    (a, k), cov = _posterior(x, y, weights, mean0, precision0, s2)
    squares = sum(w * (yi - a - k * xi) ** 2 for w, xi, yi in zip(weights, x, y, strict=True))
    shrink = precision0[0] * (a - mean0[0]) ** 2 + precision0[1] * (k - mean0[1]) ** 2
    det = cov[0] * cov[2] - cov[1] ** 2  # the posterior's over the prior's: how much the data had to pin down
    evidence = -0.5 * (squares / s2 + shrink + sum(weights) * math.log(2 * math.pi * s2)
                       - math.log(det * precision0[0] * precision0[1]))
    if k < 0:  # peaks that fall as batches grow are noise: the level at the batches' centre, flat
        centre = sum(w * xi for w, xi in zip(weights, x, strict=True)) / sum(weights)
        a, k = a + k * centre, 0.0
    return a, k, s2, cov, evidence


def evaluate(query: str, batch: PlannedBatch, limits: Mapping[str, float],
             observations: Mapping[str, Sequence[Observation]], target_risk: float = OOM_RISK_TARGET,
             settings: ModelSettings = ModelSettings(), state_bytes: float = 0.0,
             baselines: Mapping[str, float] | None = None, execution_region_bytes: float | None = None) -> Evaluation:
    """Risk per pool with a limit (`limits`: pool -> bytes) for the planned batch, and the safe cap.

    `state_bytes` is what the query's state stores hold now (`memoryUsedBytes` of its stateful operators): the
    HDFS state store lives in the heap, so it adds to the heap's peak whatever the batch's size. `baselines`: what
    each pool holds when idle now, where it is measured; the next batch stands on the higher of that and the newest
    batch's baseline (it may run in the worker that ran the last one). `execution_region_bytes`: the most execution
    memory Spark grants (`execution_region` of the conf), the heap's execution memory stops there.
    """
    pools = []
    for pool in POOLS:
        limit = limits.get(pool)
        if not limit:
            continue
        seen = observations.get(pool, ())
        last = max(seen, key=lambda o: o.batch_id, default=None)
        baseline = max((baselines or {}).get(pool, 0.0), last.baseline_bytes if last is not None else 0.0)
        floor = baseline + (state_bytes if pool == HEAP else 0.0)
        model = fit(seen, limit, settings, pool, baseline, execution_region_bytes)
        pools.append(_judge(pool, limit, floor, model, batch.bytes, settings,
                            None if last is None or last.failed else last.peak_bytes))
    partitions = len(batch.rows_per_partition)
    allowed = safe_batch_bytes(pools, target_risk, settings) if partitions else None
    cap = safe_rows_per_partition(allowed, partitions, batch.bytes_per_row)
    safe_bytes = None if allowed is None else max(0, math.floor(allowed / partitions / batch.arrow_per_weight))
    return Evaluation(query, batch, tuple(pools), target_risk, cap, settings.confidence, safe_bytes)


def safe_batch_bytes(pools: Iterable[PoolRisk], target_risk: float, settings: ModelSettings = ModelSettings()
                     ) -> float | None:
    """The largest batch (Arrow bytes) that keeps each pool's bound <= target x its limit; 0 when even an empty batch
    is over it; None when no pool bounds the batch."""
    allowed = [_largest_batch(pool, target_risk * pool.limit_bytes, settings.confidence) for pool in pools]
    return min((a for a in allowed if a is not None), default=None)


def safe_rows_per_partition(allowed: float | None, partitions: int, bytes_per_row: float) -> int | None:
    """The largest cap whose full batch (every partition at the cap) stays within `allowed` batch bytes (the safe
    batch); 0 when even an empty batch is over it; None when no partition is known or no pool bounds the batch."""
    if allowed is None or partitions <= 0 or bytes_per_row <= 0:
        return None
    return max(0, math.floor(allowed / (bytes_per_row * partitions)))


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
            f"bytes) is predicted to peak at {worst.predicted_peak_bytes:.0f} bytes of {worst.pool}, up to "
            f"{worst.peak_bound_bytes:.0f} at {evaluation.confidence:.0%} confidence (limit {worst.limit_bytes:.0f}, "
            f"risk {worst.risk:.2f} > {evaluation.target_risk}; {worst.model.observations} batches seen); {advice}")


def _growth(o: Observation, limit_bytes: float) -> float:
    """What the batch added to the pool beyond its baseline, its state and Spark's execution memory; a batch that
    died of the pool reached its limit at least."""
    if o.failed:
        return max(o.peak_bytes, limit_bytes) - o.baseline_bytes - o.state_bytes
    return o.peak_bytes - o.baseline_bytes - o.state_bytes - o.execution_bytes


def _execution(observations: Sequence[Observation], region: float | None) -> tuple[float, float | None]:
    """Execution memory per batch byte, the highest seen in batches that did not spill (one that spilled stopped
    short of its need), and the most it can reach: Spark's execution region (beyond it an operator spills, or fails
    with Spark's own out-of-memory error, a heap failure the model learns once it happened); without the region,
    the highest level a batch spilled at."""
    measured = [o for o in observations if o.batch_bytes > 0 and o.execution_bytes > 0]
    ratio = max((o.execution_bytes / o.batch_bytes for o in measured if not o.spilled), default=0.0)
    if region is not None:
        return ratio, region
    return ratio, max((o.execution_bytes for o in measured if o.spilled), default=None)


def _posterior(x: Sequence[float], y: Sequence[float], weights: Sequence[float], mean0: tuple[float, float],
               precision0: tuple[float, float], s2: float) -> tuple[tuple[float, float], tuple[float, float, float]]:
    """Posterior mean and covariance (var a, cov, var k) of y = a + k x under a normal prior and noise variance s2."""
    s0 = sum(weights) / s2
    s1 = sum(w * xi for w, xi in zip(weights, x, strict=True)) / s2
    s11 = sum(w * xi * xi for w, xi in zip(weights, x, strict=True)) / s2
    t0 = sum(w * yi for w, yi in zip(weights, y, strict=True)) / s2
    t1 = sum(w * xi * yi for w, xi, yi in zip(weights, x, y, strict=True)) / s2
    a00, a01, a11 = precision0[0] + s0, s1, precision0[1] + s11
    b0, b1 = precision0[0] * mean0[0] + t0, precision0[1] * mean0[1] + t1
    det = a00 * a11 - a01 * a01
    cov = (a11 / det, -a01 / det, a00 / det)
    return (cov[0] * b0 + cov[1] * b1, cov[1] * b0 + cov[2] * b1), cov


def quantile(peak: Sequence[tuple[float, float, float]], level: float) -> float:
    """The `level` quantile of a mixture of normals, (weight, mean, sd) each: Newton's steps inside a bisection
    bracket."""
    if len(peak) == 1:
        _, mean, sd = peak[0]
        return mean + _NORMAL.inv_cdf(level) * sd
    low = min(m - 10 * sd for _, m, sd in peak)
    high = max(m + 10 * sd for _, m, sd in peak)
    guess = max(peak)[1]
    for _ in range(_QUANTILE_ROUNDS):
        below = _cdf(peak, guess) - level
        low, high = (guess, high) if below < 0 else (low, guess)
        density = sum(w * _NORMAL.pdf((guess - m) / sd) / sd for w, m, sd in peak if sd > 0)
        step = guess - below / density if density > 0 else low - 1
        step = step if low < step < high else (low + high) / 2
        if abs(step - guess) <= _QUANTILE_TOLERANCE * (high - low + abs(guess)):
            return step
        guess = step
    return guess


def _cdf(peak: Sequence[tuple[float, float, float]], value: float) -> float:
    return sum(w * (_NORMAL.cdf((value - m) / sd) if sd > 0 else float(value >= m)) for w, m, sd in peak)


def _judge(pool: str, limit: float, floor: float, model: PeakModel, batch_bytes: float, settings: ModelSettings,
           observed: float | None) -> PoolRisk:
    peak = model.peak(batch_bytes, floor, limit)
    mean = sum(w * m for w, m, _ in peak)
    bound, low = quantile(peak, settings.confidence), max(0.0, quantile(peak, 1 - settings.confidence))
    return PoolRisk(pool, limit, mean, observed, model, bound, low, 1.0 - _cdf(peak, limit), floor)


def _largest_batch(pool: PoolRisk, allowed: float, confidence: float) -> float | None:
    """The largest batch bytes whose bound stays <= `allowed`; None when no batch size reaches it."""
    if pool.bound_at(0.0, confidence) > allowed:
        return 0.0
    high = max(pool.limit_bytes, 1.0)
    while pool.bound_at(high, confidence) <= allowed:
        high *= 2
        if high > 1e18:
            return None
    low = 0.0
    for _ in range(_SEARCH_ROUNDS):
        middle = (low + high) / 2
        low, high = (middle, high) if pool.bound_at(middle, confidence) <= allowed else (low, middle)
    return low
