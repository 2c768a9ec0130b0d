"""The doctor's report: per query its facts (the `/status` shape: desync and lag views, tuning values, state, last
failure) and its findings, each with plain advice; healthy when no finding needs action."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from opsd.results.desync import DesyncState


class Severity(StrEnum):
    INFO = "info"
    ACTION = "action"


class FindingKind(StrEnum):
    """What a finding is about, for scripts (`opsd doctor --json`); a queue's desync finding is its `DesyncState`."""

    PERMANENT_FAILURE = "permanent_failure"
    FAILED = "failed"
    CRASH_LOOP = "crash_loop"
    STALLED = "stalled"
    DESYNC_UNKNOWN = "problem"  # a queue's desync could not be judged (its positions could not be read)
    RESHARDED = "resharded"
    LAG = "lag"
    MEMORY = "memory"
    PHASES = "phases"
    TRIM_SOON = "trim_soon"
    VITAL_CONSUMER_STALLED = "vital_consumer_stalled"
    PRODUCER_PROBLEM = "producer_problem"
    PRODUCER_SESSIONS_AHEAD = "producer_sessions_ahead"
    PRODUCER_ZOMBIE_FENCED = "producer_zombie_fenced"


@dataclass(frozen=True)
class Finding:
    """Something the doctor saw (`what`) and what to do about it (`advice`: the command to run, the value to set);
    `kind` names the finding for scripts (a `FindingKind`, or a queue's `DesyncState`: `opsd.doctor.advice`)."""

    query: str
    severity: Severity
    what: str
    advice: str
    kind: FindingKind | DesyncState


#: A finding before it names its query: (kind, severity, what, advice).
Advice = tuple[FindingKind | DesyncState, Severity, str, str]


@dataclass(frozen=True)
class QueryReport:
    query: str
    facts: Mapping[str, Any]
    findings: tuple[Finding, ...] = ()


@dataclass(frozen=True)
class Report:
    """What `opsd doctor` prints; `source` says where the facts came from (a daemon URL, a config, a checkpoint)."""

    source: str
    queries: tuple[QueryReport, ...] = field(default_factory=tuple)

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(f for q in self.queries for f in q.findings)

    @property
    def healthy(self) -> bool:
        return all(f.severity is not Severity.ACTION for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "healthy": self.healthy,
                "queries": {q.query: {"facts": dict(q.facts), "findings": [asdict(f) for f in q.findings]}
                            for q in self.queries}}
