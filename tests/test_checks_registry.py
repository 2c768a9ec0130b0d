"""The checks are built in one place and read where queries stand once per cycle: the registry's checks for a session
and for a config, one positions reading shared by the checks of a cycle, and the one serializer of typed results."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from opsd.checks.desync.check import DesyncCheck
from opsd.checks.lag.check import LagCheck
from opsd.checks.positions.collect import PositionsCollector, QueryTarget
from opsd.checks.registry import FRESH_SHARE, SparkMemory, build_checks
from opsd.checks.scheduler import CheckScheduler
from opsd.config.models import ChecksSettings, OpsdConfig
from opsd.observe.recorder import Recorder
from opsd.observe.results import DesyncState, PartitionLag, QueryLag
from opsd.observe.status import StatusStore, json_number, jsonable
from opsd.telemetry.metrics import Metrics
from tests.support.checkpoint import job_with_checkpoint


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class NoStages:
    def stages(self) -> list:
        return []


@pytest.fixture
def recorder() -> Recorder:
    return Recorder(Metrics(CollectorRegistry()), StatusStore())


@pytest.fixture
def lagging(yt, yt_root: str, tmp_path: Path) -> tuple[str, str, str]:
    return job_with_checkpoint(yt, yt_root, tmp_path / "cp", {0: {0: 9, 1: 9}, 1: {0: 19, 1: 19}}, committed=1,
                               consumer_at=10)


def names(checks) -> list[str]:
    return [s.check.name for s in checks.scheduled]


def test_a_session_alone_gets_the_watchdog_and_the_position_checks_and_a_config_every_check(recorder,
                                                                                             cluster_uri) -> None:
    settings = ChecksSettings(desync_seconds=15, lag_seconds=20, retention_seconds=25, autotune_seconds=12,
                              oom_risk_seconds=30, phases_seconds=7)
    alone = build_checks(recorder, settings, cluster_uri=cluster_uri)
    config = OpsdConfig.model_validate({"cluster": cluster_uri, "pipelines": [
        {"name": "p", "source": {"path": "//q", "options": {"consumer_path": "//c"}}, "sink": {"format": "console"},
         "checkpoint_location": "/cp"}]})
    full = build_checks(recorder, settings, config=config, memory=SparkMemory(NoStages(), {}))

    assert names(alone) == ["watchdog", "desync", "lag", "queue_agent", "trim", "vital_consumers"]
    assert names(full) == ["watchdog", "tuning", "desync", "lag", "queue_agent", "trim", "vital_consumers", "phases",
                           "oom", "autotune"]
    assert [s.interval_seconds for s in full.scheduled] == [10, 10, 15, 20, 20, 25, 25, 7, 30, 12]
    assert {full.named(n).positions for n in ("desync", "lag", "queue_agent", "trim", "vital_consumers", "oom",
                                              "autotune")} == {full.positions}
    assert full.positions.max_age_seconds == FRESH_SHARE * 12  # the shortest interval of the position checks
    assert [t.query for t in full.positions.targets] == ["p"]
    assert full.before_start == [full.named("oom").before_start, full.named("autotune").before_start]


def test_scheduling_adds_each_check_once_under_its_name_and_runs_the_tuning_values_at_once(recorder,
                                                                                           cluster_uri) -> None:
    config = OpsdConfig.model_validate({"cluster": cluster_uri, "pipelines": [
        {"name": "p", "source": {"path": "//q", "options": {"consumer_path": "//c"}}, "sink": {"format": "console"}}]})
    registry = CollectorRegistry()
    scheduler = CheckScheduler(Metrics(registry))

    build_checks(recorder, config.checks, config=config).schedule(scheduler)

    assert sorted(job.id for job in scheduler.scheduler.get_jobs()) == ["autotune", "desync", "lag", "phases",
                                                                         "queue_agent", "trim", "tuning",
                                                                         "vital_consumers", "watchdog"]
    assert registry.get_sample_value("opsd_check_runs_total", {"check": "tuning"}) == 1
    assert registry.get_sample_value("opsd_check_runs_total", {"check": "desync"}) == 0


def test_the_checks_of_one_cycle_evaluate_one_reading(yt, cluster_uri, lagging, recorder) -> None:
    q, c, location = lagging
    clock = Clock()
    positions = PositionsCollector(cluster_uri, [QueryTarget("job", location)], max_age_seconds=10, clock=clock)
    desync, lag = DesyncCheck(recorder, positions), LagCheck(recorder, positions)

    desync.run()
    for p in (0, 1):  # the world moves within the cycle: the cycle's checks still agree on what they saw
        yt.advance_consumer(c, q, p, None, 20)
    lag.run()
    first = positions.read()
    clock.now += 10
    desync.run()

    assert positions.read() is not first and positions.read().at == 1010.0
    assert [p.consumer_offset for p in first.queues[0].partitions] == [10, 10]
    assert recorder.status.get("job").desync[q].desync.state == DesyncState.IN_SYNC


def test_the_one_serializer_writes_enums_keys_and_infinity_and_reads_infinity_back() -> None:
    lag = QueryLag("q", (PartitionLag("//q", 3, 7, None),), input_rows_per_second=2.0, processed_rows_per_second=1.0)

    shown = jsonable(lag)

    assert shown == {"backlog_rows": 7, "time_to_drain_seconds": "+Inf", "input_rows_per_second": 2.0,
                     "processed_rows_per_second": 1.0, "queues": {"//q": {"3": {"unread_rows": 7,
                                                                                  "lag_seconds": None}}}}
    assert json_number(shown["time_to_drain_seconds"]) == math.inf == lag.time_to_drain_seconds
    assert jsonable({"state": DesyncState.STUCK, "pair": (1, -math.inf)}) == {"state": "stuck", "pair": [1, "-Inf"]}
