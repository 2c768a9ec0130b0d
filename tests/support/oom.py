"""An OOM check's verdict built by hand, for tests of its readers (the recorder, the tuner, the doctor)."""

from __future__ import annotations

from opsd.results.oom import OomVerdict


def oom_verdict(risk: float, safe_rows: int | None = None, safe_bytes: int | None = None, *,
                batch_bytes: float = 1e6) -> OomVerdict:
    """A verdict of `risk` with the safe caps given (no pools)."""
    return OomVerdict(risk=risk, confidence=0.95, exceed_probability=min(1.0, risk), batch_bytes=batch_bytes,
                      safe_max_rows_per_partition=safe_rows, safe_max_bytes_per_partition=safe_bytes)
