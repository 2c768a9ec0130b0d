"""Pre-flight: what is wrong with a pipeline is found before its query starts, each problem naming its culprit;
and a failure a restart cannot fix stops the pipeline instead of restarting it for ever."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from opsd.config.models import OpsdConfig
from opsd.observe.readiness import ProgressPolicy, evaluate_readiness
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.runtime.preflight import preflight
from opsd.runtime.runner import Supervisor
from opsd.telemetry.metrics import Metrics
from tests.support.cluster import make_queue
from tests.support.sink import make_table
from tests.support.wait import wait_until


@pytest.fixture
def layout(yt, yt_root) -> dict[str, str]:
    """A queue with a registered consumer and a result table that fits `SELECT data FROM source`."""
    paths = {"queue": f"{yt_root}/q", "consumer": f"{yt_root}/c", "result": f"{yt_root}/out"}
    make_queue(yt, paths["queue"], consumer=paths["consumer"])
    make_table(yt, paths["result"], [{"name": "data", "type": "string"}])
    return paths


def config(cluster_uri: str, layout: dict[str, str], **changes: Any) -> OpsdConfig:
    pipeline: dict[str, Any] = {
        "name": "p", "source": {"path": layout["queue"], "options": {"consumer_path": layout["consumer"]}},
        "transform": {"sql": "SELECT data FROM source"},
        "sink": {"format": "yt", "path": layout["result"]}, "checkpoint_location": "/tmp/cp"}
    for key, value in changes.items():
        section, _, field = key.partition("__")
        if field:
            pipeline[section] = {**pipeline[section], field: value}
        else:
            pipeline[section] = value
    return OpsdConfig.model_validate({"cluster": cluster_uri, "pipelines": [pipeline]})


def problems(cfg: OpsdConfig, spark=None) -> list[str]:
    return [str(p) for p in preflight(cfg, spark)["p"]]


def test_a_sound_pipeline_has_no_problem(cluster_uri, layout, spark) -> None:
    assert problems(config(cluster_uri, layout), spark) == []


@pytest.mark.parametrize(("changes", "fragments"), [
    ({"source__path": "//home/nope/queue"}, ("source", "//home/nope/queue")),
    ({"source__options": {"consumer_path": "//home/nope/consumer"}}, ("source", "//home/nope/consumer")),
    ({"source__options": {"consumer_path": "//c", "max_row_per_partition": "5"}}, ("source", "max_row_per_partition")),
    ({"sink__path": "//home/nope/out"}, ("sink", "//home/nope/out")),
    ({"sink__options": {"dyn_batch_size": "0"}}, ("sink", "dyn_batch_size")),
    ({"transform": {"callable": "no_such_module.transforms:f"}}, ("transform", "no_such_module")),
    ({"sink": {"format": "foreachBatch", "callable": "tests.support.pipelines:no_such_function"}},
     ("sink", "no_such_function")),
    ({"checkpoint_location": None}, ("checkpoint", "checkpoint_location")),
])
def test_each_problem_names_its_part_and_culprit(cluster_uri, layout, changes, fragments) -> None:
    found = problems(config(cluster_uri, layout, **changes))
    assert len(found) == 1, found
    part, culprit = fragments
    assert found[0].startswith(f"pipeline 'p': {part}: ") and culprit in found[0]


def test_a_sink_table_that_does_not_fit_the_transforms_output_is_found_with_spark(cluster_uri, layout, spark) -> None:
    found = problems(config(cluster_uri, layout, transform={"sql": "SELECT data, 1 AS extra FROM source"}), spark)
    assert len(found) == 1 and found[0].startswith("pipeline 'p': sink: ") and "extra" in found[0]


def test_a_failure_a_restart_cannot_fix_stops_the_pipeline_and_says_so(spark, cluster_uri) -> None:
    name = f"broken_{uuid.uuid4().hex[:8]}"
    cfg = OpsdConfig.model_validate({"cluster": cluster_uri, "pipelines": [{
        "name": name, "source": {"format": "rate"}, "sink": {"format": "memory"},
        "transform": {"callable": "no_such_module.transforms:f"},
        "restart": {"initial_backoff_seconds": 0.1, "max_backoff_seconds": 0.1}}]})
    registry = CollectorRegistry()
    recorder = Recorder(Metrics(registry), StatusStore())
    supervisor = Supervisor(spark, cfg.pipelines[0], recorder)

    supervisor.start()
    assert supervisor.finished.wait(60)
    wait_until(lambda: not supervisor._thread.is_alive(), 10, "the supervisor thread to end")

    assert supervisor.permanent_failure is not None and "no_such_module" in supervisor.permanent_failure.message
    assert registry.get_sample_value("opsd_query_restarts_total", {"query": name}) == 0
    assert registry.get_sample_value("opsd_query_failed_permanently", {"query": name}) == 1
    readiness = evaluate_readiness(recorder.status.snapshot().values(), 0.0, ProgressPolicy())
    [reason] = readiness.degraded  # visible in /readyz's document, without taking the daemon out of the Service
    assert reason.reason == "failed_permanently" and "no_such_module" in reason.detail
