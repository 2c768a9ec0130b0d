"""The OOM check's verdict (`opsd.checks.oom`): the next batch's risk per memory pool and the safe caps."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from opsd.results.values import parsed_fields


class MeasuredBy(StrEnum):
    """What measured a memory pool's peaks: opsd's sampler of the local processes, or Spark's executor metrics."""

    SAMPLER = "sampler"
    SPARK_METRICS = "spark_metrics"


@dataclass(frozen=True)
class PoolVerdict:
    """One memory pool's verdict for the next batch: the expected peak, its interval at the confidence, the
    probability it passes the limit, the baseline, the last observed peak, how many batches the fit saw and what
    measured the pool (`sampler` or `spark_metrics`)."""

    pool: str
    risk: float
    predicted_peak_bytes: float
    peak_interval_bytes: tuple[float, float]
    exceed_probability: float
    limit_bytes: float
    baseline_bytes: float
    observed_peak_bytes: float | None
    observations: int
    measured_by: MeasuredBy

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], pool: str) -> PoolVerdict:
        """The inverse of `to_json` (the pool is its key in the verdict's document)."""
        return parsed_fields(cls, doc, pool=pool)

    def to_json(self) -> Mapping[str, Any]:
        return {"risk": self.risk, "predicted_peak_bytes": self.predicted_peak_bytes,
                "peak_interval_bytes": self.peak_interval_bytes, "exceed_probability": self.exceed_probability,
                "limit_bytes": self.limit_bytes, "baseline_bytes": self.baseline_bytes,
                "observed_peak_bytes": self.observed_peak_bytes, "observations": self.observations,
                "measured_by": self.measured_by}


@dataclass(frozen=True)
class OomVerdict:
    """The OOM check's verdict for a query's next batch, over its pools."""

    risk: float
    confidence: float
    exceed_probability: float
    batch_bytes: float
    safe_max_rows_per_partition: int | None
    pools: tuple[PoolVerdict, ...] = ()
    safe_max_bytes_per_partition: int | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> OomVerdict:
        """The inverse of `to_json`."""
        pools = tuple(PoolVerdict.from_json(p, name) for name, p in (doc.get("pools") or {}).items())
        return parsed_fields(cls, doc, pools=pools)

    def to_json(self) -> Mapping[str, Any]:
        return {"risk": self.risk, "confidence": self.confidence, "exceed_probability": self.exceed_probability,
                "batch_bytes": self.batch_bytes, "safe_max_rows_per_partition": self.safe_max_rows_per_partition,
                "safe_max_bytes_per_partition": self.safe_max_bytes_per_partition,
                "pools": {p.pool: p for p in self.pools}}
