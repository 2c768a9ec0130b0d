"""Read the metric and label names out of PromQL expressions.

Dashboards and alert rules may only use metrics that :mod:`opsd.telemetry.metrics` defines (architecture:
"Metrics"). There is no PromQL parser among the dependencies and none is needed for names: after
dropping strings, label matchers, ranges and grouping clauses, every identifier that is not a function
call or a keyword is a metric name. promtool, which has the real parser, checks the syntax separately.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from opsd.telemetry.metrics import METRIC_DEFINITIONS, MetricDefinition, MetricType

_SELECTOR = re.compile(r"(?<![\w:])([a-zA-Z_:][\w:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_]\w*)\s*(=~|!~|!=|=)\s*\"((?:[^\"\\]|\\.)*)\"")
_NOT_NAMES = (
    re.compile(r'"(?:[^"\\]|\\.)*"'),  # strings
    re.compile(r"\{[^}]*\}"),  # label matchers
    re.compile(r"\[[^\]]*\]"),  # ranges and subqueries
    re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)"),  # label lists
)
_IDENTIFIER = re.compile(r"(?<![\w:.$])([a-zA-Z_:][\w:]*+)(?!\s*\()")
_KEYWORDS = frozenset({
    "and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
    "group_right", "inf", "nan", "Inf", "NaN",
})
_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")

# Labels Prometheus attaches to every scraped series: target labels of a Kubernetes ServiceMonitor.
SCRAPE_LABELS = frozenset({"job", "instance", "namespace", "pod", "service", "container", "endpoint"})
# Series Prometheus itself writes for every target; alerts on a missing opsd need `up`.
PROMETHEUS_SERIES = frozenset({"up"})


def series_names(expr: str) -> set[str]:
    """Every metric name an expression selects."""
    for pattern in _NOT_NAMES:
        expr = pattern.sub(" ", expr)
    return set(_IDENTIFIER.findall(expr)) - _KEYWORDS


def selectors(expr: str) -> list[tuple[str, dict[str, str]]]:
    """Each ``name{...}`` selector as its metric name and ``{label: operator + value}``."""
    return [(name, {label: op + value for label, op, value in _MATCHER.findall(matchers)})
            for name, matchers in _SELECTOR.findall(expr)]


def exposed_names(definition: MetricDefinition) -> set[str]:
    """The series names Prometheus stores for one definition.

    A histogram has no series under its bare name, only ``_bucket`` / ``_sum`` / ``_count``; a
    counter is exposed with ``_total`` whether or not the definition spells it.
    """
    if definition.type is MetricType.HISTOGRAM:
        return {definition.name + suffix for suffix in _HISTOGRAM_SUFFIXES}
    if definition.type is MetricType.COUNTER and not definition.name.endswith("_total"):
        return {definition.name + "_total"}
    return {definition.name}


def defined_series(
    definitions: Iterable[MetricDefinition] = METRIC_DEFINITIONS,
) -> dict[str, MetricDefinition]:
    """Map every exposed series name to the definition it comes from."""
    return {name: d for d in definitions for name in exposed_names(d)}


def unknown_metrics(expr: str) -> set[str]:
    """Names in ``expr`` that neither :mod:`opsd.telemetry.metrics` nor Prometheus itself exposes."""
    return series_names(expr) - defined_series().keys() - PROMETHEUS_SERIES


def unknown_labels(expr: str) -> dict[str, set[str]]:
    """Per opsd selector, matcher labels that the metric's definition does not declare."""
    series = defined_series()
    unknown: dict[str, set[str]] = {}
    for name, matchers in selectors(expr):
        if name not in series:
            continue
        allowed = set(series[name].labels) | SCRAPE_LABELS | {"le"}
        if extra := matchers.keys() - allowed:
            unknown.setdefault(name, set()).update(extra)
    return unknown
