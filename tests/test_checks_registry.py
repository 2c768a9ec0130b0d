"""The checks are built in one place and read where queries stand once per cycle: the registry's checks for a session
and for a config, one positions reading evaluated by the steps of a cycle in their order, and the one serializer of
typed results."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from opsd.checks.cycle import Cycle, Step
from opsd.checks.desync.check import DesyncCheck
from opsd.checks.lag.check import LagCheck
from opsd.checks.registry import STEPS, SparkMemory, build_checks, build_diagnosis
from opsd.checks.scheduler import CheckScheduler
from opsd.collect.positions import PositionsCollector, QueryTarget
from opsd.config.models import ChecksSettings, OpsdConfig
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore, jsonable
from opsd.results.autotune import Knob, TuneReason
from opsd.results.desync import DesyncState
from opsd.results.lag import PartitionLag, QueryLag
from opsd.results.values import json_number
from opsd.telemetry.metrics import Metrics
from streaming_core.tuning import default_tuning_path
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


def steps(checks) -> list[str]:
    return [s.check.name for s in checks.cycle.steps]


def test_a_session_alone_gets_the_watchdog_and_the_position_checks_and_a_config_every_check(recorder,
                                                                                             cluster_uri) -> None:
    settings = ChecksSettings(desync_seconds=15, lag_seconds=20, retention_seconds=25, autotune_seconds=12,
                              oom_risk_seconds=30, phases_seconds=7)
    alone = build_checks(recorder, settings, cluster_uri=cluster_uri)
    config = OpsdConfig.model_validate({"cluster": cluster_uri, "pipelines": [
        {"name": "p", "source": {"path": "//q", "options": {"consumer_path": "//c"}}, "sink": {"format": "console"},
         "checkpoint_location": "/cp"}]})
    full = build_checks(recorder, settings, config=config, memory=SparkMemory(NoStages(), {}))

    assert names(alone) == ["watchdog", "cycle"]
    assert steps(alone) == ["lag", "queue_agent", "trim", "vital_consumers", "desync"]
    assert names(full) == ["watchdog", "tuning", "phases", "cycle"]
    assert steps(full) == ["lag", "queue_agent", "trim", "vital_consumers", "desync", "oom", "autotune"]
    assert [s.interval_seconds for s in full.scheduled] == [10, 10, 7, 12]  # the cycle: its shortest step's interval
    assert [s.interval_seconds for s in full.cycle.steps] == [20, 20, 25, 25, 15, 30, 12]
    assert {full.named(n).positions for n in steps(full)} == {full.positions, full.cycle.positions}
    assert [t.query for t in full.positions.targets] == ["p"]
    assert full.before_start == [full.named("oom").before_start, full.named("autotune").before_start]


def test_scheduling_adds_each_check_once_under_its_name_and_runs_the_tuning_values_at_once(recorder,
                                                                                           cluster_uri) -> None:
    config = OpsdConfig.model_validate({"cluster": cluster_uri, "pipelines": [
        {"name": "p", "source": {"path": "//q", "options": {"consumer_path": "//c"}}, "sink": {"format": "console"}}]})
    registry = CollectorRegistry()
    scheduler = CheckScheduler(Metrics(registry))

    build_checks(recorder, config.checks, config=config).schedule(scheduler)

    assert sorted(job.id for job in scheduler.scheduler.get_jobs()) == ["cycle", "phases", "tuning", "watchdog"]
    assert registry.get_sample_value("opsd_check_runs_total", {"check": "tuning"}) == 1
    assert registry.get_sample_value("opsd_check_runs_total", {"check": "cycle"}) == 0


def test_the_steps_of_one_cycle_evaluate_one_reading_in_their_order(yt, cluster_uri, lagging, recorder) -> None:
    q, c, location = lagging
    clock = Clock()
    positions = PositionsCollector(cluster_uri, [QueryTarget("job", location)], clock=clock)
    seen: list[tuple[str, float, int]] = []

    class Moving(LagCheck):
        """The lag check, and then the world moves within the cycle: the steps after it still see the reading."""

        def evaluate(self, reading):
            seen.append((self.name, reading.at, reading.queues[0].partitions[0].consumer_offset))
            for p in (0, 1):
                yt.advance_consumer(c, q, p, None, 20)
            return super().evaluate(reading)

    class Desync(DesyncCheck):
        def evaluate(self, reading):
            seen.append((self.name, reading.at, reading.queues[0].partitions[0].consumer_offset))
            return super().evaluate(reading)

    cycle = Cycle(recorder, positions, [Step(Moving(recorder, positions), 10), Step(Desync(recorder, positions), 10)],
                  clock=clock)
    trace = cycle.run()

    assert seen == [("lag", 1000.0, 10), ("desync", 1000.0, 10)]
    assert [(s.step, s.reading_at) for s in trace.steps] == [("positions", 1000.0), ("lag", 1000.0),
                                                             ("desync", 1000.0)]
    assert recorder.status.get("job").desync[q].desync.state == DesyncState.LAGGING_ONE_BATCH  # what it saw
    clock.now += 10
    cycle.run()
    assert seen[-1] == ("desync", 1010.0, 20) and recorder.status.get("job").desync[q].desync.state \
        == DesyncState.IN_SYNC
    cycle.close()


def test_the_doctors_diagnosis_runs_the_registrys_checks_on_one_reading_and_changes_nothing(yt, cluster_uri, lagging,
                                                                                          recorder) -> None:
    q, c, location = lagging  # one batch behind: a daemon heals it; no cap yet: a daemon applies a first cap
    config = OpsdConfig.model_validate({"cluster": cluster_uri, "pipelines": [
        {"name": "job", "source": {"path": q, "options": {"consumer_path": c}}, "sink": {"format": "console"},
         "checkpoint_location": location}]})
    diagnosis = build_diagnosis(recorder, cluster_uri, [QueryTarget("job", location, q, c, heal=True)],
                                config=config, clock=Clock())

    diagnosis.run()

    status = recorder.status.get("job")
    assert [s.name for s in diagnosis.steps] == [n for n in STEPS if n != "oom"]
    assert not any(t.heal for t in diagnosis.positions.targets)
    assert status.desync[q].desync.state == DesyncState.LAGGING_ONE_BATCH and status.desync[q].last_heal is None
    assert yt.get_consumer_offsets(c, q) == {0: 10, 1: 10}  # not healed
    tuner = status.autotune[Knob.MAX_ROWS]
    assert (tuner.decision.reason, tuner.applied) == (TuneReason.FIRST_BATCH_SAFE, False)
    assert not yt.exists(default_tuning_path(c))  # recommended, never written
    assert status.lag.backlog_rows == 0 and status.trim is not None and status.vital_consumers == ()


def test_the_one_serializer_writes_enums_keys_and_infinity_and_reads_infinity_back() -> None:
    lag = QueryLag("q", (PartitionLag("//q", 3, 7, None),), input_rows_per_second=2.0, processed_rows_per_second=1.0)

    shown = jsonable(lag)

    assert shown == {"backlog_rows": 7, "time_to_drain_seconds": "+Inf", "input_rows_per_second": 2.0,
                     "processed_rows_per_second": 1.0, "queues": {"//q": {"3": {"unread_rows": 7,
                                                                                  "lag_seconds": None}}}}
    assert json_number(shown["time_to_drain_seconds"]) == math.inf == lag.time_to_drain_seconds
    assert jsonable({"state": DesyncState.STUCK, "pair": (1, -math.inf)}) == {"state": "stuck", "pair": [1, "-Inf"]}
