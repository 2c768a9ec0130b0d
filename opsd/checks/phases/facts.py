"""What the phases check evaluates: a pipeline's recent batches, the parts they recorded and the shares it recorded
last (frozen, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from opsd.observe.phases import PhaseShares
from opsd.observe.progress import BatchSummary
from streaming_core.phases import BatchRecords


@dataclass(frozen=True)
class PhaseFacts:
    query: str
    run_id: str | None
    batches: tuple[BatchSummary, ...]
    records: Mapping[int, BatchRecords]
    previous: PhaseShares | None
