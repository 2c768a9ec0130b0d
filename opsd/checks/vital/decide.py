"""Decide which vital consumers need a person: standing still for `VITAL_CONSUMER_STALLED_SECONDS` while rows wait
(the level `OpsdVitalConsumerStalled` pages at). Pure."""

from __future__ import annotations

from dataclasses import replace

from opsd.config.thresholds import VITAL_CONSUMER_STALLED_SECONDS
from opsd.results.vital import VitalConsumerAudit


def decide(audit: VitalConsumerAudit, stalled_seconds: float = VITAL_CONSUMER_STALLED_SECONDS) -> VitalConsumerAudit:
    return replace(audit, stalled=audit.stalled_seconds >= stalled_seconds)
