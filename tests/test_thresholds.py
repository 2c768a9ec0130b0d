"""Each level opsd judges by is defined once (`opsd.config.thresholds`): the alert rules are checked against it, and
the dashboards, the doctor and the config defaults read it."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from grafana import build
from opsd.config.models import AutotuneSettings, ChecksSettings
from opsd.config.thresholds import ALERT_THRESHOLDS, OOM_RISK_HIGH, OOM_RISK_TARGET
from opsd.doctor.advice import findings

# A comparison of a series with a level: `> 900`, `>= 0.9` (comparisons with 0 or 1 test a flag or a presence).
COMPARED_LEVEL = re.compile(r"[<>]=?\s*(-?[0-9][0-9.e+]*)")


def alert_rules() -> dict[str, dict[str, Any]]:
    return {rule["alert"]: rule for group in yaml.safe_load(build.ALERTS_FILE.read_text())["groups"]
            for rule in group["rules"]}


def levels(expr: str) -> set[float]:
    return {float(n) for n in COMPARED_LEVEL.findall(expr)} - {0.0, 1.0}


def test_every_level_an_alert_compares_with_is_the_one_definition() -> None:
    rules = alert_rules()
    compared = {name: levels(rule["expr"]) for name, rule in rules.items() if levels(rule["expr"])}
    assert compared == {name: set(map(float, defined)) for name, defined in ALERT_THRESHOLDS.items()}


def test_the_level_check_sees_a_changed_threshold() -> None:
    assert levels("opsd_oom_risk >= 0.8") == {0.8}
    assert levels("max by (q) (opsd_queue_lag_seconds) > 900 and on (q) x > 300") == {900.0, 300.0}
    assert levels("opsd_query_up == 0") == set()


def test_dashboard_red_lines_are_the_thresholds_of_the_alerts_they_link() -> None:
    drawn = 0
    for panel in (p for dashboard in (build.overview(), build.pipeline()) for p in dashboard["panels"]):
        steps = panel.get("fieldConfig", {}).get("defaults", {}).get("thresholds", {}).get("steps", [])
        if not steps:
            continue
        alert = re.search(r"#(\w+)$", panel["description"])
        assert alert is not None, panel["title"]
        [name] = [n for n in ALERT_THRESHOLDS if n.lower() == alert.group(1)]
        assert steps[-1]["value"] == ALERT_THRESHOLDS[name][0], panel["title"]
        drawn += 1
    assert drawn >= 5


def test_config_defaults_aim_at_the_oom_risk_target() -> None:
    assert ChecksSettings().oom_risk_target == OOM_RISK_TARGET
    assert AutotuneSettings().risk_threshold == OOM_RISK_TARGET
    assert OOM_RISK_TARGET < OOM_RISK_HIGH  # what the tuner corrects by itself pages no one


@pytest.mark.parametrize(("risk", "needs_action"), [
    (OOM_RISK_HIGH, True), (OOM_RISK_HIGH + 0.05, True), (OOM_RISK_HIGH - 0.01, False), (OOM_RISK_TARGET, False),
])
def test_the_doctor_acts_from_the_alerts_oom_risk(risk: float, needs_action: bool) -> None:
    facts = {"active": True, "oom_risk": risk, "safe_max_rows_per_partition": 1000, "max_rows_per_partition": 5000}
    memory = [f for f in findings("q", facts, lambda q: "heal") if "memory pool" in f.what]
    assert bool(memory) is needs_action
