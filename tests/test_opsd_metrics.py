"""The metric definitions table and the registered metrics agree and follow the naming rules."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from opsd import __version__
from opsd.telemetry.metrics import METRIC_DEFINITIONS, Metrics, MetricType


@pytest.fixture
def registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Metrics(registry)
    return registry


def test_every_definition_is_exposed_with_its_type_help_and_labels(registry: CollectorRegistry) -> None:
    families = {f.name: f for f in registry.collect()}

    for definition in METRIC_DEFINITIONS:
        # prometheus-client names counter families without the _total suffix.
        family = families[definition.name.removesuffix("_total")]
        assert family.type == definition.type.value
        assert family.documentation == definition.help
        assert family.unit == definition.unit


def test_no_metric_is_registered_outside_the_table(registry: CollectorRegistry) -> None:
    defined = {d.name.removesuffix("_total") for d in METRIC_DEFINITIONS}

    assert {f.name for f in registry.collect()} == defined


@pytest.mark.parametrize("definition", METRIC_DEFINITIONS, ids=lambda d: d.name)
def test_names_follow_prometheus_conventions(definition) -> None:
    assert definition.name.startswith("opsd_")
    assert definition.help.strip()
    assert definition.name.endswith("_total") == (definition.type is MetricType.COUNTER)
    if definition.unit:
        assert definition.name.removesuffix("_total").endswith("_" + definition.unit)
    assert "app" not in definition.labels and "application_id" not in definition.labels


def test_build_info_is_one_with_versions(registry: CollectorRegistry) -> None:
    [sample] = [s for f in registry.collect() if f.name == "opsd_build_info" for s in f.samples]

    assert sample.value == 1
    assert sample.labels["version"] == __version__
    assert sample.labels["pyspark_version"].startswith("4.")


def test_labelled_values_appear_in_the_exposition_under_the_table_names() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    metrics.input_rows.labels(query="q").inc(5)
    metrics.source_backlog_rows.labels(query="q", queue="//home/q", partition="0").set(7)

    text = generate_latest(registry).decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }

    assert samples[("opsd_input_rows_total", (("query", "q"),))] == 5
    assert samples[("opsd_source_backlog_rows", (("partition", "0"), ("query", "q"), ("queue", "//home/q")))] == 7


def test_two_registries_do_not_share_values() -> None:
    first, second = CollectorRegistry(), CollectorRegistry()
    Metrics(first).input_rows.labels(query="q").inc()
    Metrics(second)

    assert first.get_sample_value("opsd_input_rows_total", {"query": "q"}) == 1
    assert second.get_sample_value("opsd_input_rows_total", {"query": "q"}) is None
