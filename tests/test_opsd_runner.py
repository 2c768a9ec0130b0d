"""The runner: the restart decision (`Backoff`, pure) and `Supervisor` / `Runner` on the real Spark session."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from opsd.config.models import PipelineConfig, RestartPolicy
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.runtime.runner import Backoff, Runner, Supervisor
from opsd.telemetry.metrics import Metrics
from tests.support.cluster import make_queue
from tests.support.pipelines import Knobs
from tests.support.wait import wait_until

WAIT_SECONDS = 120.0
STOP_SECONDS = 60.0


def backoff(initial: float = 1.0, maximum: float = 60.0, max_restarts: int | None = None) -> Backoff:
    return Backoff(RestartPolicy(initial_backoff_seconds=initial, max_backoff_seconds=maximum,
                                 max_restarts=max_restarts))


class TestBackoff:
    def test_delay_doubles_from_the_initial_value_and_stops_at_the_cap(self) -> None:
        assert [backoff(1.0, 10.0).delay(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]

    def test_delay_of_an_endless_crash_loop_stays_at_the_cap(self) -> None:
        assert backoff(1.0, 300.0).delay(5000) == 300.0

    def test_reaching_the_cap_marks_a_crash_loop(self) -> None:
        assert [backoff(1.0, 4.0).at_cap(n) for n in range(1, 5)] == [False, False, True, True]

    def test_gives_up_only_after_max_restarts_failures_were_restarted(self) -> None:
        assert [backoff(max_restarts=2).gives_up(n) for n in range(1, 5)] == [False, False, True, True]

    def test_without_max_restarts_never_gives_up(self) -> None:
        assert not backoff(max_restarts=None).gives_up(10**6)


@pytest.fixture(autouse=True)
def reset_knobs() -> Iterator[None]:
    Knobs.reset()
    yield
    Knobs.reset()


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def recorder(registry: CollectorRegistry) -> Recorder:
    return Recorder(Metrics(registry), StatusStore())


@pytest.fixture
def supervisors(spark) -> Iterator[list[Supervisor]]:
    """Supervisors a test starts; stopped afterwards so no query outlives its test."""
    started: list[Supervisor] = []
    yield started
    for s in started:
        s.stop(5)


def pipeline(name: str, **fields: Any) -> PipelineConfig:
    """A pipeline reading the `rate` source into a memory table named like the pipeline."""
    config: dict[str, Any] = {"name": name, "source": {"format": "rate", "options": {"rowsPerSecond": 20}},
                              "sink": {"format": "memory"}, "trigger": {"processing_time": "500 milliseconds"}}
    return PipelineConfig.model_validate({**config, **fields})


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def has_progress(supervisor: Supervisor) -> bool:
    query = supervisor.query
    return query is not None and query.isActive and query.lastProgress is not None


class TestSupervisor:
    def test_failing_starts_are_restarted_with_backoff_and_the_crash_loop_clears_once_healthy(
            self, spark, recorder: Recorder, registry: CollectorRegistry, supervisors: list[Supervisor]) -> None:
        name = unique("flaky")
        Knobs.transform_failures_left = 2
        config = pipeline(name, transform={"callable": "tests.support.pipelines:flaky_transform"},
                          restart={"initial_backoff_seconds": 0.2, "max_backoff_seconds": 0.4})
        supervisor = Supervisor(spark, config, recorder, healthy_after_seconds=2.0)
        supervisors.append(supervisor)

        with capture_logs() as logs:
            supervisor.start()
            wait_until(lambda: has_progress(supervisor), WAIT_SECONDS, "the third start to make progress")
        restarts = [e for e in logs if e["event"] == "query_restarted"]

        assert Knobs.transform_calls == 3
        assert registry.get_sample_value("opsd_query_restarts_total", {"query": name}) == 2
        assert [e["crash_loop"] for e in restarts] == [False, True], "the second delay (0.4 s) is the cap"
        wait_until(lambda: registry.get_sample_value("opsd_query_crash_loop", {"query": name}) == 0,
                   WAIT_SECONDS, "the crash-loop flag to clear after a healthy run")
        status = recorder.status.get(name)
        assert status is not None and status.restarts == 2 and not status.crash_loop

    def test_gives_up_after_max_restarts_and_leaves_the_crash_loop_flag_set(
            self, spark, recorder: Recorder, registry: CollectorRegistry, supervisors: list[Supervisor]) -> None:
        name = unique("doomed")
        Knobs.transform_failures_left = 100
        config = pipeline(name, transform={"callable": "tests.support.pipelines:flaky_transform"},
                          restart={"initial_backoff_seconds": 0.1, "max_backoff_seconds": 0.1, "max_restarts": 2})
        supervisor = Supervisor(spark, config, recorder)
        supervisors.append(supervisor)

        with capture_logs() as logs:
            supervisor.start()
            assert supervisor.finished.wait(WAIT_SECONDS)

        assert supervisor.gave_up
        assert Knobs.transform_calls == 3, "the first start and max_restarts=2 restarts"
        assert registry.get_sample_value("opsd_query_restarts_total", {"query": name}) == 2
        assert registry.get_sample_value("opsd_query_crash_loop", {"query": name}) == 1
        assert [e["event"] for e in logs if e["event"].startswith("pipeline_")] == [
            "pipeline_failed", "pipeline_failed", "pipeline_gave_up"]

    def test_query_failing_while_running_is_restarted_and_runs_on(
            self, spark, recorder: Recorder, registry: CollectorRegistry, supervisors: list[Supervisor]) -> None:
        name = unique("batch_fails")
        Knobs.batch_failures_left = 1
        config = pipeline(name, sink={"format": "foreachBatch", "callable": "tests.support.pipelines:failing_batch"},
                          restart={"initial_backoff_seconds": 0.2})
        supervisor = Supervisor(spark, config, recorder)
        supervisors.append(supervisor)

        supervisor.start()
        wait_until(lambda: has_progress(supervisor), WAIT_SECONDS, "the restarted query to make progress")

        assert Knobs.batch_failures_left == 0
        assert registry.get_sample_value("opsd_query_restarts_total", {"query": name}) == 1
        assert not supervisor.finished.is_set()

    def test_stop_lets_the_running_batch_finish_then_ends_the_query(
            self, spark, recorder: Recorder, supervisors: list[Supervisor], tmp_path: Path) -> None:
        Knobs.batch_log = tmp_path / "batches.log"
        Knobs.batch_log.touch()
        # No trigger: batches run back to back, so the trigger is (almost) never idle when stop() looks.
        config = pipeline(unique("slow"), trigger={},
                          sink={"format": "foreachBatch", "callable": "tests.support.pipelines:slow_batch"})
        supervisor = Supervisor(spark, config, recorder)
        supervisors.append(supervisor)
        supervisor.start()
        wait_until(lambda: batch_ids(Knobs.batch_log, "start") - batch_ids(Knobs.batch_log, "end"),
                   WAIT_SECONDS, "a batch to be running")

        started_before_stop = batch_ids(Knobs.batch_log, "start")
        began = time.monotonic()
        supervisor.stop(STOP_SECONDS)

        assert started_before_stop <= batch_ids(Knobs.batch_log, "end"), "every running batch finished"
        assert time.monotonic() - began < STOP_SECONDS / 2, "stopped after the batch, not at the timeout"
        assert supervisor.finished.is_set()
        assert supervisor.query is not None and not supervisor.query.isActive

    def test_stop_while_the_query_is_still_starting_ends_it(
            self, spark, recorder: Recorder, supervisors: list[Supervisor]) -> None:
        name = unique("early_stop")
        supervisor = Supervisor(spark, pipeline(name), recorder)
        supervisors.append(supervisor)

        supervisor.start()
        supervisor.stop(STOP_SECONDS)

        assert supervisor.finished.is_set()
        assert [q.name for q in spark.streams.active if q.name == name] == []


def batch_ids(log: Path, kind: str) -> set[int]:
    return {int(line.split()[1]) for line in log.read_text().splitlines() if line.startswith(f"{kind} ")}


def test_runner_notices_an_available_now_pipeline_that_finished_by_itself(spark, yt, yt_root, recorder) -> None:
    queue, consumer = f"{yt_root}/queue", f"{yt_root}/consumer"
    make_queue(yt, queue, consumer=consumer)
    yt.insert_rows(queue, [{"data": f"r{i}", "n": i} for i in range(30)])
    name = unique("once")
    config = pipeline(name, source={"format": "yt", "path": queue, "options": {"consumer_path": consumer}},
                      trigger={"available_now": True})
    runner = Runner(spark, [config], recorder)

    runner.start()
    wait_until(runner.all_finished, WAIT_SECONDS, "the availableNow pipeline to finish")

    assert not runner.supervisors[0].gave_up
    assert spark.table(name).count() == 30
