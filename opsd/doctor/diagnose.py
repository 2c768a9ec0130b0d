"""The diagnosis: gathered facts in, a `Report` out — each query's facts with its findings and advice; and the
findings that keep a config's pipelines from resuming (`opsd run --check`)."""

from __future__ import annotations

from opsd.collect.positions import targets_for
from opsd.config.models import OpsdConfig
from opsd.doctor.advice import RESUME_BLOCKERS, Naming, desync_findings, findings
from opsd.doctor.gather import Gathered, from_targets
from opsd.doctor.report import Finding, QueryReport, Report
from streaming_core.cluster import Cluster


def diagnose(source: str, gathered: Gathered, naming: Naming) -> Report:
    return Report(source, tuple(QueryReport(name, gathered.facts(name),
                                            tuple(findings(name, status, naming, offline=gathered.offline)))
                                for name, status in sorted(gathered.statuses.items())))


def resume_findings(cluster: Cluster, config: OpsdConfig, naming: Naming, at: float) -> list[Finding]:
    """Per pipeline of the config, the doctor's desync findings that keep its checkpoint from resuming (read now,
    as `opsd doctor --config` reads them: the same collect and evaluate)."""
    pipelines = {p.name for p in config.pipelines}
    gathered = from_targets(cluster, [t for t in targets_for(config) if t.query in pipelines], at)
    return [f for name, status in sorted(gathered.statuses.items()) for f in desync_findings(name, status, naming, None)
            if f.kind in RESUME_BLOCKERS]
