"""A batch's phases from Spark's durations and the parts its tasks recorded (`opsd.observe.phases`), the phases
check's evaluation and what the recorder makes of it: every phase in seconds adding up to the batch's duration, the
tasks' summed time scaled to the time they ran side by side, each batch counted once."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from opsd.checks.phases.evaluate import evaluate
from opsd.checks.phases.facts import PhaseFacts
from opsd.doctor.advice import PHASE_ADVICE, Naming, findings
from opsd.doctor.report import Severity
from opsd.observe.phases import batch_phases, shares_of
from opsd.observe.progress import BatchSummary
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.telemetry.metrics import Metrics
from streaming_core.phases import PHASES, BatchRecords, TaskTimes

DURATIONS = {"triggerExecution": 2.0, "latestOffset": 0.1, "queryPlanning": 0.05, "getBatch": 0.0,
             "walCommit": 0.1, "addBatch": 1.6, "commitOffsets": 0.1}


def _records(batch_id: int = 4) -> BatchRecords:
    """Two read tasks and two sink tasks side by side for 1.4 s, the sink's commit 0.1 s."""
    reads = (TaskTimes(batch_id, 100.0, 101.0, worker_start=0.1, read_wait=0.6, decode=0.1, acknowledge=0.05),
             TaskTimes(batch_id, 100.0, 101.2, read_wait=0.7, decode=0.1))
    sinks = (TaskTimes(batch_id, 100.0, 101.4, upstream_wait=1.0 + 0.6, sink_insert=0.4),
             TaskTimes(batch_id, 100.1, 101.3, upstream_wait=1.0, sink_insert=0.2))
    return BatchRecords(batch_id, reads, sinks, 0.1)


def test_the_phases_add_up_to_the_batch_and_the_tasks_fill_the_time_they_ran():
    phases = batch_phases(BatchSummary(4, durations_seconds=DURATIONS), _records())

    assert set(phases.seconds) == set(PHASES)
    assert sum(phases.seconds.values()) == pytest.approx(2.0)
    assert phases.seconds["planning"] == pytest.approx(0.15)
    assert phases.seconds["acknowledge"] == pytest.approx(0.05)
    assert phases.seconds["commit"] == pytest.approx(0.1)
    executor = sum(phases.seconds[p] for p in ("worker_start", "read_wait", "decode", "transform", "sink_insert"))
    assert executor == pytest.approx(1.5), "summed task time (3.2 s) scaled to the 1.5 s from the first worker's start"
    assert phases.seconds["read_wait"] / phases.seconds["sink_insert"] == pytest.approx(1.3 / 0.6)
    transform = 2.6 - (0.1 + 1.3 + 0.2)  # what the sinks waited beyond the reads' own parts
    assert phases.seconds["transform"] == pytest.approx(transform * 1.5 / 3.2)
    # measured: Spark's planning, walCommit (less the acknowledging inside it), commitOffsets; ours; the tasks
    assert phases.measured_seconds == pytest.approx(0.15 + 0.05 + 0.1 + 1.5 + (0.1 - 0.05) + 0.1)
    assert phases.scheduling_seconds == 0, "the tasks and the commit fill addBatch"
    assert phases.coverage == pytest.approx(phases.measured_seconds / 2.0)


def test_without_a_yt_sink_the_reads_time_suspended_is_the_transformation_and_sink_downstream():
    records = BatchRecords(1, (TaskTimes(1, 10.0, 11.0, read_wait=0.3, decode=0.1),))
    phases = batch_phases(BatchSummary(1, durations_seconds={"triggerExecution": 1.5, "addBatch": 1.2}), records)
    assert phases.seconds["transform"] == pytest.approx(0.6)
    assert phases.seconds["commit"] == phases.seconds["sink_insert"] == 0
    assert phases.seconds["spark_other"] == pytest.approx(0.5)
    assert phases.scheduling_seconds == pytest.approx(0.2), "addBatch beyond the task: Spark scheduling it"
    assert phases.coverage == pytest.approx(1.2 / 1.5), "nobody measured the 0.3 s outside addBatch"


def test_tasks_that_ran_longer_than_spark_says_the_batch_ran_show_as_coverage_over_one():
    records = BatchRecords(1, (TaskTimes(1, 10.0, 12.0, read_wait=1.5, decode=0.1),))
    phases = batch_phases(BatchSummary(1, durations_seconds={"triggerExecution": 1.5, "addBatch": 1.2}), records)
    assert phases.coverage > 1.3
    assert sum(phases.seconds.values()) == pytest.approx(1.5), "the parts still add up to the duration"


def test_a_batch_without_records_or_duration_has_no_phases():
    assert batch_phases(BatchSummary(1, durations_seconds=DURATIONS), None) is None
    assert batch_phases(BatchSummary(1, durations_seconds=DURATIONS), BatchRecords(1)) is None
    assert batch_phases(BatchSummary(4, durations_seconds={"addBatch": 1.0}), _records()) is None


def test_the_shares_name_the_largest_phase_in_words():
    slow_reads = BatchRecords(4, (TaskTimes(4, 0.0, 2.0, read_wait=1.7, decode=0.1),), (), None)
    shares = shares_of([batch_phases(BatchSummary(4, durations_seconds={"triggerExecution": 2.0}), slow_reads)])
    assert shares.largest == "read_wait"
    assert shares.words == "85% of batch time waiting for the cluster's reads"
    assert sum(shares.shares.values()) == pytest.approx(1.0)


def _facts(batch_ids, previous=None, run_id="r1") -> PhaseFacts:
    return PhaseFacts("q", run_id, tuple(BatchSummary(b, durations_seconds=DURATIONS) for b in batch_ids),
                      {b: _records(b) for b in batch_ids if b != 6}, previous)


def test_each_batch_is_counted_once_per_run_and_the_recorder_exports_the_counts_and_shares():
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    first = evaluate(_facts([4, 5, 6]))
    assert [b.batch_id for b in first.new] == [4, 5] and first.shares.batches == 2, "batch 6 recorded nothing"
    recorder.record_phases("q", first.shares, first.new)
    again = evaluate(_facts([4, 5, 6, 7], recorder.status.get("q").phases))
    assert [b.batch_id for b in again.new] == [7] and again.shares.batches == 3
    restarted = evaluate(_facts([0], recorder.status.get("q").phases, run_id="r2"))
    assert [b.batch_id for b in restarted.new] == [0], "a new run counts from its first batch"
    recorder.record_phases("q", again.shares, again.new)

    registry = recorder.metrics.registry
    seconds = {p: registry.get_sample_value("opsd_batch_time_seconds_total", {"query": "q", "phase": p})
               for p in PHASES}
    assert sum(seconds.values()) == pytest.approx(3 * 2.0)
    assert recorder.status.get("q").phases.last_batch_id == 7
    assert recorder.status.to_json()["queries"]["q"]["phases"]["largest"] == again.shares.largest


def test_the_doctor_says_where_the_batches_time_goes_in_words():
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    evaluation = evaluate(_facts([4, 5]))
    recorder.record_phases("q", evaluation.shares, evaluation.new)
    [found] = findings("q", recorder.status.get("q"), Naming.of_config("opsd.yaml"))

    assert (found.kind, found.severity) == ("phases", Severity.INFO)
    assert found.what.startswith(f"{evaluation.shares.shares[evaluation.shares.largest]:.0%} of batch time ")
    assert "the last 2 measured batches" in found.what and found.advice == PHASE_ADVICE[evaluation.shares.largest]
