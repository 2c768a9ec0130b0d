"""Read the metric and label names out of PromQL expressions.

Dashboards and alert rules may only use metrics that :mod:`opsd.metrics` defines (architecture:
"Metrics"). There is no PromQL parser in the dependencies, and none is needed: metric names are
identifiers with a fixed prefix, so a regular expression finds every one of them. promtool, which has
the real parser, checks the syntax separately.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from opsd.metrics import METRIC_DEFINITIONS, MetricDefinition, MetricType

_OPSD_NAME = re.compile(r"\bopsd_[a-z_]+")
_SELECTOR = re.compile(r"\b(opsd_[a-z_]+)\s*\{([^}]*)\}")
_MATCHER_LABEL = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")

# Labels Prometheus itself attaches to every scraped series (target labels and the histogram `le`).
SCRAPE_LABELS = frozenset({"job", "instance", "namespace", "pod", "service", "container", "endpoint"})


def metric_names(expr: str) -> set[str]:
    """Every ``opsd_*`` series name an expression selects."""
    return set(_OPSD_NAME.findall(expr))


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


def defined_series(definitions: Iterable[MetricDefinition] = METRIC_DEFINITIONS) -> dict[str, MetricDefinition]:
    """Map every exposed series name to the definition it comes from."""
    return {name: d for d in definitions for name in exposed_names(d)}


def unknown_metrics(expr: str) -> set[str]:
    """Names in ``expr`` that no definition in :mod:`opsd.metrics` exposes."""
    return metric_names(expr) - defined_series().keys()


def selector_labels(expr: str) -> dict[str, set[str]]:
    """Label names used in the ``{...}`` matchers of each ``opsd_*`` selector in ``expr``."""
    used: dict[str, set[str]] = {}
    for name, matchers in _SELECTOR.findall(expr):
        used.setdefault(name, set()).update(_MATCHER_LABEL.findall(matchers))
    return used


def unknown_labels(expr: str) -> dict[str, set[str]]:
    """Per selector, matcher labels that the metric's definition does not declare."""
    series = defined_series()
    unknown = {}
    for name, labels in selector_labels(expr).items():
        definition = series.get(name)
        allowed = set(definition.labels if definition else ()) | SCRAPE_LABELS | {"le"}
        if extra := labels - allowed:
            unknown[name] = extra
    return unknown
