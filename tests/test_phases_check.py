"""The phases check reads each pipeline's phases documents (the source's and, when it names its own, the sink's),
merges a batch's read and sink records, and records the shares of the recent batches it can measure."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from opsd.checks.phases.check import PhasesCheck
from opsd.config.models import OpsdConfig
from opsd.observe.progress import BatchSummary
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.telemetry.metrics import Metrics
from streaming_core.phase_timing import record_read, record_sink
from streaming_core.phases import TaskTimes

DURATIONS = {"triggerExecution": 1.0, "latestOffset": 0.1, "addBatch": 0.8, "walCommit": 0.1}


def test_a_batchs_read_and_sink_records_from_two_documents_make_its_phases(cluster_uri, yt_root, yt):
    config = OpsdConfig.model_validate({"cluster": cluster_uri, "pipelines": [
        {"name": "p", "source": {"format": "yt", "path": f"{yt_root}/q", "options": {"consumer_path": f"{yt_root}/c"}},
         "sink": {"format": "yt", "path": f"{yt_root}/out", "options": {"tuning_path": f"{yt_root}/sink_tuning"}}},
        {"name": "console", "source": {"format": "rate"}, "sink": {"format": "console"}}]})
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    recorder.status.update("p", run_id="r", recent_batches=(BatchSummary(3, durations_seconds=DURATIONS),
                                                            BatchSummary(4, durations_seconds=DURATIONS)))
    record_read(yt, f"{yt_root}/c_tuning", 0, TaskTimes(3, 10.0, 10.7, read_wait=0.4, decode=0.1, acknowledge=0.05))
    record_sink(yt, f"{yt_root}/sink_tuning", 3, [TaskTimes(3, 10.0, 10.7, upstream_wait=0.6, sink_insert=0.1)], 0.05)

    [found, nothing] = PhasesCheck(recorder, config).run()

    assert nothing.shares is None and nothing.new == ()
    assert [b.batch_id for b in found.new] == [3], "batch 4 recorded nothing"
    phases = recorder.status.get("p").phases
    assert phases.batches == 1 and phases.largest == "read_wait"
    assert phases.seconds["commit"] == pytest.approx(0.05) and phases.seconds["sink_insert"] > 0
    read_wait = recorder.metrics.registry.get_sample_value("opsd_batch_time_seconds_total",
                                                           {"query": "p", "phase": "read_wait"})
    assert read_wait == pytest.approx(0.4), "the task's parts fill the 0.7 s it ran"
