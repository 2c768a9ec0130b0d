"""The diagnosis: gathered facts in, a `Report` out — each query's facts with its findings and advice."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opsd.doctor.advice import HealCommand, findings
from opsd.doctor.report import QueryReport, Report


def diagnose(source: str, queries: Mapping[str, Mapping[str, Any]], heal_command: HealCommand) -> Report:
    return Report(source, tuple(QueryReport(name, facts, tuple(findings(name, facts, heal_command)))
                                for name, facts in sorted(queries.items())))
