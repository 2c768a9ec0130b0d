"""The Grafana dashboards: committed JSON equals a fresh build, every query is valid PromQL over metrics
that opsd defines, and per-query panels follow the `query` variable.
"""

from __future__ import annotations

import re

import pytest
import yaml

from grafana import build
from grafana.promql import defined_series, selectors, series_names, unknown_labels, unknown_metrics
from opsd.telemetry.metrics import METRIC_DEFINITIONS
from tests.support.prometheus import needs_promtool, promtool

DASHBOARD = build.overview()
TARGETS = [(panel["title"], target) for panel in DASHBOARD["panels"] for target in panel.get("targets", [])]
QUERY_MATCHER = "=~$query"
PIPELINE = build.pipeline()
PIPELINE_PANELS = [panel for panel in PIPELINE["panels"] if panel["type"] != "row"]
PIPELINE_EXPRESSIONS = list(build.expressions(PIPELINE))
# What Grafana substitutes before the query reaches Prometheus.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$query": ".*", "$namespace": ".*", "$instance": ".*",
                     "$pipeline": "clicks"}


def target_id(item: tuple[str, dict]) -> str:
    title, target = item
    return f"{title}/{target['refId']}"


def per_query_metrics(expr: str) -> set[str]:
    """The metrics of ``expr`` whose series carry a ``query`` label."""
    series = defined_series()
    return {name for name in series_names(expr) if name in series and "query" in series[name].labels}


@pytest.mark.parametrize("directory", build.OUTPUT_DIRS, ids=lambda d: d.relative_to(build.REPO_ROOT).as_posix())
def test_committed_dashboards_equal_a_fresh_build(directory):
    for filename, text in build.build().items():
        committed = directory / filename
        assert committed.exists(), f"{committed} missing: run python -m grafana.build"
        assert committed.read_text() == text, f"{committed} is stale: run python -m grafana.build"


@pytest.mark.parametrize("item", TARGETS, ids=target_id)
def test_panel_uses_only_metrics_and_labels_that_opsd_defines(item):
    _, target = item
    assert unknown_metrics(target["expr"]) == set()
    assert unknown_labels(target["expr"]) == {}


def test_the_dashboard_shows_every_metric_opsd_defines():
    used = {defined_series()[name].name for _, target in TARGETS for name in series_names(target["expr"])}
    assert {d.name for d in METRIC_DEFINITIONS} - used == set()


@pytest.mark.parametrize("item", TARGETS, ids=target_id)
def test_per_query_series_follow_the_query_variable(item):
    _, target = item
    labelled = per_query_metrics(target["expr"])
    for name, matchers in selectors(target["expr"]):
        assert matchers.get("query") == (QUERY_MATCHER if name in labelled else None), name
    assert labelled <= {name for name, _ in selectors(target["expr"])}, "a per-query metric without matcher"


@pytest.mark.parametrize("item", TARGETS, ids=target_id)
def test_per_query_series_keep_the_query_label_in_aggregations_and_legends(item):
    _, target = item
    if not per_query_metrics(target["expr"]):
        return
    for grouping in re.findall(r"\bby\s*\(([^)]*)\)", target["expr"]):
        assert "query" in {label.strip() for label in grouping.split(",")}
    assert "{{query}}" in target["legendFormat"]


def test_the_query_variable_lists_the_query_label_of_a_defined_metric():
    assert list(build.variable_sources(DASHBOARD)) == [("opsd_query_up", "query")]
    assert list(build.problems(DASHBOARD)) == []


def test_every_panel_and_target_queries_the_datasource_variable():
    variables = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    for panel in DASHBOARD["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}"
        assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])


def test_panels_do_not_overlap_and_fit_the_grid():
    taken: set[tuple[int, int]] = set()
    for panel in DASHBOARD["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= build.GRID_WIDTH
        cells = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"]) for y in range(pos["y"], pos["y"] + pos["h"])}
        assert not cells & taken, panel["title"]
        taken |= cells


@needs_promtool
def test_every_panel_query_is_valid_promql(tmp_path):
    """promtool parses each expression as a recording rule, after Grafana's variable substitution."""
    rules = []
    for index, expr in enumerate([target["expr"] for _, target in TARGETS] + PIPELINE_EXPRESSIONS):
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        rules.append({"record": f"dashboard:expr_{index}", "expr": expr})
    rule_file = tmp_path / "dashboard_rules.yaml"
    rule_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = promtool("check", "rules", str(rule_file))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("expr", PIPELINE_EXPRESSIONS)
def test_the_drill_down_selects_one_pipeline_of_one_namespace_and_instance(expr):
    """Two releases with the same query name must not merge: every per-query selector names all three."""
    assert unknown_metrics(expr) == set() and unknown_labels(expr) == {}
    labelled = per_query_metrics(expr)
    assert labelled
    for name, matchers in selectors(expr):
        if name in labelled:
            scope = {label: matchers.get(label) for label in ("namespace", "instance", "query")}
            assert scope == {"namespace": "=~$namespace", "instance": "=~$instance", "query": "=$pipeline"}, name


def test_the_drill_down_variables_narrow_namespace_then_instance_then_one_pipeline():
    variables = {v["name"]: v for v in PIPELINE["templating"]["list"]}
    assert list(variables) == ["datasource", "namespace", "instance", "pipeline"]
    assert variables["pipeline"]["multi"] is False and variables["pipeline"]["includeAll"] is False
    assert "$namespace" in variables["instance"]["query"]
    assert {"$namespace", "$instance"} <= set(re.findall(r"\$\w+", variables["pipeline"]["query"]))
    assert list(build.problems(PIPELINE)) == []


def test_the_drill_down_annotates_restarts_failures_and_tuning_decisions():
    annotations = {a["name"]: a["expr"] for a in PIPELINE["annotations"]["list"]}
    assert set(annotations) == {"Restarts", "Failures", "Tuning decisions"}
    assert "opsd_query_restarts_total" in annotations["Restarts"]
    assert "opsd_query_failures_total" in annotations["Failures"]
    assert "opsd_tuning_max_rows_per_partition" in annotations["Tuning decisions"]


def test_drill_down_panels_on_an_alerted_metric_link_its_runbook_and_draw_its_threshold():
    alerts = {rule["alert"]: rule for group in yaml.safe_load(build.ALERTS_FILE.read_text())["groups"]
              for rule in group["rules"]}
    linked = {}
    for panel in PIPELINE_PANELS:
        if match := re.search(r"Runbook: (\S+)$", panel["description"]):
            linked[panel["title"]] = match.group(1)
            assert match.group(1) in {rule["annotations"]["runbook_url"] for rule in alerts.values()}
        steps = panel["fieldConfig"]["defaults"].get("thresholds", {}).get("steps", [])
        if steps:
            threshold, above = steps[-1]["value"], steps[-1]["color"] == "red"  # red above it, or (a time left) below
            assert [s["color"] for s in steps] == (["green", "red"] if above else ["red", "green"]), panel["title"]
            comparison = ">=?" if above else "<=?"
            assert any(re.search(rf"{comparison} {threshold:g}\b", rule["expr"]) for rule in alerts.values()), \
                panel["title"]
    assert len(linked) >= 8


def test_the_drill_down_shows_every_per_query_metric_opsd_defines():
    per_query = {d.name for d in METRIC_DEFINITIONS if "query" in d.labels}
    shown = {defined_series()[name].name for expr in PIPELINE_EXPRESSIONS for name in per_query_metrics(expr)}
    assert per_query - shown == set()
