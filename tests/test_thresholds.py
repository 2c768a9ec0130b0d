"""Each level opsd judges by is defined once (`opsd.config.thresholds`): the alert rules are checked against it, and
the dashboards, the doctor and the config defaults read it. The connector's limits are defined once too
(`streaming_core.cluster.base`), and no module writes one of these numbers again."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from grafana import build
from opsd.config.models import AutotuneSettings, ChecksSettings
from opsd.config.thresholds import (
    ALERT_THRESHOLDS,
    OOM_CONFIDENCE,
    OOM_HALF_LIFE_BATCHES,
    OOM_RISK_HIGH,
    OOM_RISK_TARGET,
)
from opsd.doctor.advice import Naming, findings
from opsd.observe.status import QueryStatus
from opsd.results.oom import OomVerdict
from streaming_core.cluster.base import MAX_ROWS_PER_TABLET_TRANSACTION, READ_BATCH_BYTES, READ_BATCH_ROWS

ROOT = Path(__file__).resolve().parent.parent
#: The one module that writes each number.
DEFINED_IN = {
    OOM_RISK_TARGET: "opsd/config/thresholds.py", OOM_RISK_HIGH: "opsd/config/thresholds.py",
    OOM_CONFIDENCE: "opsd/config/thresholds.py",
    MAX_ROWS_PER_TABLET_TRANSACTION: "streaming_core/cluster/base.py",
    READ_BATCH_ROWS: "streaming_core/cluster/base.py", READ_BATCH_BYTES: "streaming_core/cluster/base.py",
}
#: Numbers equal to one of those by chance: other things, each named where it is written.
OTHER_MEANINGS = {
    ("opsd/checks/autotune/evaluate.py", 0.9),  # BINDING_SHARE: the share of the cap from which it binds
    ("opsd/config/models.py", 0.7),  # autotune.target_share: the share of the trigger interval a batch may last
    ("opsd/config/models.py", 100_000),  # autotune.start_rows_per_partition: a first cap, not a transaction's limit
}

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


def test_the_oom_model_and_its_config_keys_share_their_defaults() -> None:
    from opsd.checks.oom.evaluate import ModelSettings

    checks, model = ChecksSettings(), ModelSettings()
    assert (checks.oom_confidence, checks.oom_half_life_batches) == (model.confidence, model.half_life_batches)
    assert (model.confidence, model.half_life_batches) == (OOM_CONFIDENCE, OOM_HALF_LIFE_BATCHES)


@pytest.mark.parametrize(("risk", "needs_action"), [
    (OOM_RISK_HIGH, True), (OOM_RISK_HIGH + 0.05, True), (OOM_RISK_HIGH - 0.01, False), (OOM_RISK_TARGET, False),
])
def test_the_doctor_acts_from_the_alerts_oom_risk(risk: float, needs_action: bool) -> None:
    status = QueryStatus("q", active=True, oom=OomVerdict(risk, 0.95, 0.0, 0.0, 1000), max_rows_per_partition=5000)
    memory = [f for f in findings("q", status, Naming.of_config("opsd.yaml")) if f.kind == "memory"]
    assert bool(memory) is needs_action


def written_numbers(path: Path) -> set[float]:
    """Every number a module writes: literals, and products of literals such as `16 * 1024 * 1024`."""
    found: set[float] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            found.add(node.value)
        elif isinstance(node, ast.BinOp) and all(isinstance(n, ast.Constant | ast.BinOp | ast.operator)
                                                 for n in ast.walk(node)):
            found.add(eval(compile(ast.Expression(node), str(path), "eval"), {}))
    return found


def test_each_limit_and_level_is_written_in_one_module() -> None:
    written_twice = sorted(
        (str(path.relative_to(ROOT)), number)
        for top in ("opsd", "streaming_core", "grafana") for path in (ROOT / top).rglob("*.py")
        for number in written_numbers(path) & set(DEFINED_IN)
        if DEFINED_IN[number] != str(path.relative_to(ROOT)) and (str(path.relative_to(ROOT)), number) not in
        OTHER_MEANINGS)
    assert written_twice == []


def test_the_scan_finds_a_number_written_again(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("LIMIT = 16 * 1024 * 1024\nRISK = 0.9\n")
    assert written_numbers(module) >= {READ_BATCH_BYTES, OOM_RISK_HIGH}
