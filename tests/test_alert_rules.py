"""The alerting rules in helm/opsd/files/alerts.yaml: valid, unit-tested by promtool, documented, and
built only on metrics that opsd defines.

promtool is the real Prometheus rule parser and evaluator (Debian package `prometheus`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from grafana.build import RUNBOOK_BASE
from grafana.promql import unknown_labels, unknown_metrics
from tests.support.prometheus import needs_promtool, promtool

ROOT = Path(__file__).resolve().parent.parent
ALERTS_FILE = ROOT / "helm" / "opsd" / "files" / "alerts.yaml"
PROMTOOL_TESTS = ROOT / "tests" / "promtool" / "alerts_test.yaml"
CHART_README = ROOT / "helm" / "opsd" / "README.md"
EXPECTED_ALERTS = {
    "OpsdQueryDown", "OpsdQueryCrashLooping", "OpsdQueryStalled", "OpsdBacklogGrowing",
    "OpsdHighBatchDuration", "OpsdWatermarkDelayHigh", "OpsdQueryFailures", "OpsdChecksFailing",
    "OpsdListenerDroppingEvents", "OpsdMetricsAbsent", "OpsdQueryFailedPermanently", "OpsdOffsetDesyncUnsafe",
    "OpsdOffsetsBeyondQueueEnd", "OpsdConsumerStuck", "OpsdLagHigh", "OpsdTimeToDrainLong",
    "OpsdTunerPinnedAtBound", "OpsdOomRiskHigh", "OpsdRowsTrimmedSoon", "OpsdVitalConsumerStalled",
    "OpsdProducerSessionsAhead", "OpsdProducerZombieFenced",
}


def alert_rules() -> list[dict]:
    """Every alerting rule of the file, across groups."""
    groups = yaml.safe_load(ALERTS_FILE.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


@needs_promtool
def test_promtool_accepts_the_rule_file():
    result = promtool("check", "rules", str(ALERTS_FILE))
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_each_alert_fires_on_its_failing_series_and_stays_silent_on_healthy_ones():
    result = promtool("test", "rules", str(PROMTOOL_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_file_defines_exactly_the_documented_alerts():
    assert {rule["alert"] for rule in alert_rules()} == EXPECTED_ALERTS


def test_every_alert_is_exercised_by_a_promtool_unit_test():
    tests = yaml.safe_load(PROMTOOL_TESTS.read_text())["tests"]
    tested = {case["alertname"] for test in tests for case in test["alert_rule_test"]}
    assert tested == EXPECTED_ALERTS


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda rule: rule["alert"])
def test_alert_uses_only_metrics_that_opsd_defines_or_up(rule):
    assert unknown_metrics(rule["expr"]) == set()


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda rule: rule["alert"])
def test_alert_matches_only_labels_its_metrics_declare(rule):
    assert unknown_labels(rule["expr"]) == {}


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda rule: rule["alert"])
def test_alert_has_a_severity_a_summary_and_a_description(rule):
    assert rule["labels"]["severity"] in {"critical", "warning", "info"}
    assert rule["annotations"]["summary"].strip()
    assert rule["annotations"]["description"].strip()


def test_every_alert_has_a_runbook_section_in_the_chart_readme():
    headings = set(re.findall(r"^###\s+(\w+)\s*$", CHART_README.read_text(), flags=re.MULTILINE))
    assert EXPECTED_ALERTS - headings == set()


def heading_anchors(markdown: str) -> set[str]:
    """The anchors a Markdown renderer (GitHub's rule) gives the headings: lower case, punctuation dropped,
    spaces as hyphens."""
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*$", markdown, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda rule: rule["alert"])
def test_alert_links_its_runbook_section_by_an_anchor_the_readme_has(rule):
    base, _, anchor = rule["annotations"]["runbook_url"].partition("#")
    assert base == RUNBOOK_BASE
    assert anchor == rule["alert"].lower()
    assert anchor in heading_anchors(CHART_README.read_text())
