"""Collect what the phases check evaluates, per pipeline: its recent batches and their previous shares (from the
status store, where the listener and this check record them) and the parts its tasks and commits stored in its phases
documents (the source's, and the sink's when it names its own tuning document)."""

from __future__ import annotations

from dataclasses import dataclass

from opsd.checks.phases.facts import PhaseFacts
from opsd.config.models import OpsdConfig
from opsd.observe.status import StatusStore
from streaming_core.cluster import Cluster
from streaming_core.phase_timing import read_batch_records
from streaming_core.phases import BatchRecords


@dataclass(frozen=True)
class PhaseTarget:
    """A pipeline whose batches' parts are recorded: the tuning documents its source and sink read."""

    query: str
    documents: tuple[str, ...]


def targets_for(config: OpsdConfig) -> list[PhaseTarget]:
    return [PhaseTarget(p.name, tuple(dict.fromkeys(d for d in (p.source_tuning_path(), p.sink_tuning_path()) if d)))
            for p in config.pipelines]


def collect(cluster: Cluster, target: PhaseTarget, status: StatusStore) -> PhaseFacts:
    """One read of each of the pipeline's phases documents; a source's and a sink's records of a batch merged."""
    found = status.get(target.query)
    records: dict[int, BatchRecords] = {}
    for document in target.documents:
        for batch_id, part in read_batch_records(cluster, document).items():
            known = records.get(batch_id)
            records[batch_id] = part if known is None else BatchRecords(
                batch_id, known.reads or part.reads, known.sinks or part.sinks,
                known.commit if known.commit is not None else part.commit)
    return PhaseFacts(target.query, found.run_id if found else None, found.recent_batches if found else (), records,
                      found.phases if found else None)
