"""The cycle of the position checks (`opsd.checks.cycle`): one reading, the steps in their order, each step's time
and outcome measured and exported, and a failing or slow step counted without holding up the others."""

from __future__ import annotations

import json
import threading

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from opsd.checks.cycle import Cycle, Step
from opsd.checks.desync.check import DesyncCheck
from opsd.checks.lag.check import LagCheck
from opsd.collect.positions import PositionsCollector, QueryTarget, Reading
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.results.cycle import StepOutcome
from opsd.telemetry.metrics import Metrics
from tests.support.checkpoint import job_with_checkpoint
from tests.support.retention import Clock


class Readings:
    """A positions collector that counts its reads; each reading is taken at the clock's time."""

    def __init__(self, clock: Clock) -> None:
        self.clock, self.reads = clock, 0

    def read(self) -> Reading:
        self.reads += 1
        return Reading(self.clock())


class Recording:
    """A step that notes the reading it evaluated; `fail` raises, `hold` blocks until released."""

    def __init__(self, name: str, seen: list[tuple[str, float]], *, fail: bool = False,
                 hold: threading.Event | None = None) -> None:
        self.name, self.seen, self.fail, self.hold = name, seen, fail, hold

    def evaluate(self, reading: Reading) -> str:
        self.seen.append((self.name, reading.at))
        if self.hold is not None:
            self.hold.wait(10)
        if self.fail:
            raise RuntimeError("a broken step")
        return self.name


@pytest.fixture
def recorder() -> Recorder:
    return Recorder(Metrics(CollectorRegistry()), StatusStore())


@pytest.fixture
def registry(recorder: Recorder) -> CollectorRegistry:
    return recorder.metrics.registry


def test_one_reading_feeds_every_step_in_order_and_the_trace_and_times_are_exported(recorder, registry) -> None:
    clock, seen = Clock(1000.0), []
    readings = Readings(clock)
    cycle = Cycle(recorder, readings, [Step(Recording(n, seen), 10) for n in ("lag", "trim", "desync")], clock=clock)

    trace = cycle.run()

    assert readings.reads == 1 and seen == [("lag", 1000.0), ("trim", 1000.0), ("desync", 1000.0)]
    assert [(s.step, s.outcome) for s in trace.steps] == [("positions", StepOutcome.OK), ("lag", StepOutcome.OK),
                                                           ("trim", StepOutcome.OK), ("desync", StepOutcome.OK)]
    assert registry.get_sample_value("opsd_cycle_duration_seconds_count") == 1
    for step in ("lag", "trim", "desync"):
        assert registry.get_sample_value("opsd_check_runs_total", {"check": step}) == 1
        assert registry.get_sample_value("opsd_check_duration_seconds_count", {"check": step}) == 1
    shown = json.loads(json.dumps(recorder.status.to_json()))["cycle"]
    assert shown["reading_at"] == 1000.0
    assert [(s["step"], s["reading_at"], s["outcome"]) for s in shown["steps"]][1:] == [
        ("lag", 1000.0, "ok"), ("trim", 1000.0, "ok"), ("desync", 1000.0, "ok")]
    assert all(s["started_at"] <= s["ended_at"] for s in shown["steps"])
    cycle.close()


def test_a_failing_step_is_counted_and_logged_and_the_steps_after_it_run(recorder, registry) -> None:
    clock, seen = Clock(1000.0), []
    cycle = Cycle(recorder, Readings(clock), [Step(Recording("lag", seen, fail=True), 10),
                                              Step(Recording("desync", seen), 10)], clock=clock)
    with capture_logs() as logs:
        trace = cycle.run()

    assert [s.outcome for s in trace.steps[1:]] == [StepOutcome.FAILED, StepOutcome.OK]
    assert registry.get_sample_value("opsd_check_errors_total", {"check": "lag"}) == 1
    assert registry.get_sample_value("opsd_check_errors_total", {"check": "desync"}) == 0  # from the start
    assert [e["step"] for e in logs if e["event"] == "cycle_step_failed"] == ["lag"]
    cycle.close()


def test_a_slow_step_holds_up_neither_the_next_step_nor_the_next_cycle(recorder, registry) -> None:
    clock, seen, release = Clock(1000.0), [], threading.Event()
    cycle = Cycle(recorder, Readings(clock), [Step(Recording("oom", seen, hold=release), 0.05),
                                              Step(Recording("autotune", seen), 0.05)], clock=clock)
    try:
        first = cycle.run()
        clock.now += 1
        second = cycle.run()
    finally:
        release.set()

    assert [s.outcome for s in first.steps[1:]] == [StepOutcome.SLOW, StepOutcome.OK]
    assert [s.outcome for s in second.steps[1:]] == [StepOutcome.STILL_RUNNING, StepOutcome.OK]
    assert seen == [("oom", 1000.0), ("autotune", 1000.0), ("autotune", 1001.0)]
    assert registry.get_sample_value("opsd_cycle_step_overruns_total", {"check": "oom"}) == 2
    assert registry.get_sample_value("opsd_check_runs_total", {"check": "autotune"}) == 2
    cycle.close()


def test_a_step_runs_when_its_own_interval_has_passed(recorder) -> None:
    clock, seen = Clock(1000.0), []
    cycle = Cycle(recorder, Readings(clock), [Step(Recording("lag", seen), 10), Step(Recording("trim", seen), 30)],
                  clock=clock)
    for _ in range(4):
        cycle.run()
        clock.now += 10

    assert cycle.interval_seconds == 10
    assert [at for name, at in seen if name == "lag"] == [1000.0, 1010.0, 1020.0, 1030.0]
    assert [at for name, at in seen if name == "trim"] == [1000.0, 1030.0]
    cycle.close()


def test_series_of_a_removed_partition_and_a_removed_query_leave_metrics_at_the_next_cycle(
        yt, yt_root, cluster_uri, tmp_path, recorder, registry) -> None:
    batches = {0: {0: 9, 1: 9}, 1: {0: 19, 1: 19}}
    qa, _, a = job_with_checkpoint(yt, f"{yt_root}/a", tmp_path / "a", batches, committed=1, consumer_at=10)
    qb, _, b = job_with_checkpoint(yt, f"{yt_root}/b", tmp_path / "b", batches, committed=1, consumer_at=10)
    positions = PositionsCollector(cluster_uri, [QueryTarget("a", a), QueryTarget("b", b)])
    cycle = Cycle(recorder, positions, [Step(LagCheck(recorder, positions), 10), Step(DesyncCheck(recorder, positions),
                                                                                        10)])

    def series(metric: str) -> set[tuple[str, str]]:
        lines = [line for line in recorder.metrics.render().decode().splitlines() if line.startswith(metric + "{")]
        return {(labels["query"], labels["partition"]) for labels in map(label_values, lines)}

    cycle.run()
    assert series("opsd_queue_unread_rows") == {("a", "0"), ("a", "1"), ("b", "0"), ("b", "1")}
    assert series("opsd_desync_rows") == {("a", "0"), ("a", "1"), ("b", "0"), ("b", "1")}

    recorder.metrics.source_backlog_rows.labels(query="b", queue=qb, partition="0").set(5)  # the listener's
    yt.trim_rows(qa, 1, 20)
    yt.reshard(qa, 1)  # the queue loses its partition 1
    positions.targets = [QueryTarget("a", a)]  # and query b leaves the config
    cycle.clock = lambda: 2e9  # every step due again
    cycle.run()

    for metric in ("opsd_queue_unread_rows", "opsd_desync_rows", "opsd_queue_lag_seconds"):
        assert {q for q, _ in series(metric)} <= {"a"} and ("a", "1") not in series(metric), metric
    assert registry.get_sample_value("opsd_desync_rows", {"query": "b", "queue": qb, "partition": "0"}) is None
    assert registry.get_sample_value("opsd_source_backlog_rows", {"query": "b", "queue": qb, "partition": "0"}) == 5
    cycle.close()


def label_values(line: str) -> dict[str, str]:
    """The labels of one exposition line."""
    inside = line[line.index("{") + 1:line.index("}")]
    return dict((key, value.strip('"')) for key, value in (pair.split("=", 1) for pair in inside.split('",')))
