"""Decide which partitions' forecasts need a person: rows the query has not read deleted within
`TRIM_ETA_SHORT_SECONDS` (the level `OpsdRowsTrimmedSoon` pages at). Pure."""

from __future__ import annotations

from dataclasses import replace

from opsd.config.thresholds import TRIM_ETA_SHORT_SECONDS
from opsd.results.trim import QueueTrim


def decide(trim: QueueTrim, short_seconds: float = TRIM_ETA_SHORT_SECONDS) -> QueueTrim:
    """`trim` with each partition's `at_risk` set."""
    return replace(trim, partitions=tuple(
        replace(p, at_risk=p.eta_seconds is not None and p.eta_seconds < short_seconds) for p in trim.partitions))
