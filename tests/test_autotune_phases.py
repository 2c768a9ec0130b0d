"""The auto-tuner reads where the batches' time goes (the phases check's shares): a knob moves only when its own
phase binds, and the reason names the phase — the read cap is not raised when the inserts, the reads, decoding or
the transformation bind, `dynBatchSize` is not cut when the cluster's reads bind nor grown when the inserts do not."""

from __future__ import annotations

from dataclasses import replace

import pytest

from opsd.checks.autotune.decide import TunerMemory, decide
from opsd.checks.autotune.evaluate import PER_BATCH_COSTS, binding, evaluate
from opsd.checks.autotune.facts import Facts
from opsd.config.models import AutotuneSettings
from opsd.observe.phases import PhaseShares
from opsd.observe.progress import BatchSummary
from opsd.results.autotune import Direction, Knob, TuneReason
from streaming_core.phases import PHASES
from streaming_core.write_stats import WriteStats

SETTINGS = AutotuneSettings()


def shares(**seconds: float) -> PhaseShares:
    """Shares of batches that spent `seconds` in the named phases (nothing in the others)."""
    full = {p: seconds.get(p, 0.0) for p in PHASES}
    total = sum(full.values())
    largest = max(full, key=lambda p: full[p])
    return PhaseShares("r", 3, 9, total, full, {p: s / total for p, s in full.items()}, largest, 1.0, "")


def fast_capped(phases: PhaseShares | None, interval: float | None = 10.0) -> Facts:
    """Batches far under the target that read their whole cap, with a backlog: the cap would be raised. `interval`:
    the processing-time trigger's (None: the default trigger, batches back to back)."""
    found = tuple(BatchSummary(i, 20_000, 10_000, 0.5 + 1e-4 * 10_000) for i in range(3))
    return Facts("q", "apply", 10_000, None, found, trigger_interval_seconds=interval, backlog_rows=1_000_000,
                 phases=phases)


def decision(f: Facts, knob: Knob):
    return next(d for d in decide(evaluate(f, SETTINGS), TunerMemory(), SETTINGS) if d.knob == knob)


def test_what_binds_is_the_per_batch_costs_together_or_the_largest_per_row_phase():
    assert binding(None) is None
    assert binding(shares(planning=0.2, spark_other=0.3, acknowledge=0.1, sink_insert=0.5)) == PER_BATCH_COSTS
    assert binding(shares(planning=0.2, spark_other=0.2, sink_insert=0.5, read_wait=0.3)) == "sink_insert"
    assert binding(shares(spark_other=0.1, read_wait=0.6, transform=0.5)) == "read_wait"


def test_the_read_cap_is_raised_when_per_batch_costs_bind_and_the_reason_says_so():
    raised = decision(fast_capped(shares(planning=0.3, spark_other=0.4, read_wait=0.2)), Knob.MAX_ROWS)
    assert raised.direction == Direction.UP and raised.reason == TuneReason.PER_BATCH_COSTS_BIND
    assert raised.inputs["binding_phase"] == PER_BATCH_COSTS
    unmeasured = decision(fast_capped(None), Knob.MAX_ROWS)
    assert unmeasured.direction == Direction.UP and unmeasured.reason == TuneReason.FAST_BATCHES


@pytest.mark.parametrize(("phase", "reason", "named"), [
    ("sink_insert", TuneReason.INSERTS_BIND, "the sink's inserts"), ("read_wait", TuneReason.READS_BIND, "reads"),
    ("decode", TuneReason.DECODE_BINDS, "decoding"), ("transform", TuneReason.TRANSFORM_BINDS, "transformation")])
def test_the_read_cap_is_not_raised_when_a_per_row_phase_binds(phase: str, reason: TuneReason, named: str):
    held = decision(fast_capped(shares(planning=0.1, spark_other=0.1, **{phase: 0.8}), interval=None), Knob.MAX_ROWS)
    assert held.direction == Direction.HOLD and held.reason == reason and named in reason.words


def test_time_left_idle_until_the_next_trigger_is_a_per_batch_cost_that_larger_batches_spread():
    """Under a 10 s processing-time trigger, batches of 1 s leave 9 s of each interval idle: with a backlog, fewer and
    larger batches drain it sooner whichever per-row phase binds inside them; once they fill the interval, not."""
    per_row = shares(planning=0.1, spark_other=0.1, transform=0.8)
    assert binding(per_row, trigger_interval_seconds=10.0) == PER_BATCH_COSTS
    assert binding(per_row, trigger_interval_seconds=0.35) == "transform"
    raised = decision(fast_capped(per_row), Knob.MAX_ROWS)
    assert raised.direction == Direction.UP and raised.reason == TuneReason.PER_BATCH_COSTS_BIND


def writes(phases: PhaseShares | None, slowest: float) -> Facts:
    stats = WriteStats(4, 200_000, slowest * 4, slowest, 50_000, batch_id=7)
    return Facts("q", "apply", None, 50_000, write=stats, dyn_batch_size_ceiling=100_000, phases=phases)


def test_slow_insert_calls_are_not_cut_when_the_clusters_reads_bind():
    slow_proxy = decision(writes(shares(read_wait=0.7, sink_insert=0.2), slowest=6.0), Knob.DYN_BATCH_SIZE)
    assert slow_proxy.direction == Direction.HOLD and slow_proxy.reason == TuneReason.READS_BIND
    slow_inserts = decision(writes(shares(read_wait=0.1, sink_insert=0.8), slowest=6.0), Knob.DYN_BATCH_SIZE)
    assert (slow_inserts.recommended, slow_inserts.reason) == (25_000, TuneReason.SLOW_CALLS_INSERTS_BIND)


def test_full_calls_try_another_size_only_where_the_inserts_bind():
    grows = decision(writes(shares(sink_insert=0.7, spark_other=0.2), slowest=0.5), Knob.DYN_BATCH_SIZE)
    assert (grows.recommended, grows.reason) == (75_000, TuneReason.CALL_SIZE_TRIED_INSERTS_BIND)
    held = decision(writes(shares(transform=0.7, sink_insert=0.2), slowest=0.5), Knob.DYN_BATCH_SIZE)
    assert held.direction == Direction.HOLD and held.reason == TuneReason.TRANSFORM_BINDS
    fixed = decision(writes(shares(spark_other=0.7, sink_insert=0.2), slowest=0.5), Knob.DYN_BATCH_SIZE)
    assert fixed.reason == TuneReason.BATCH_COSTS_BIND


def test_failed_calls_halve_whatever_binds():
    failed = decision(replace(writes(shares(read_wait=0.9), slowest=0.5),
                              write=WriteStats(4, 200_000, 2.0, 0.5, 50_000, retries=2, batch_id=7)),
                      Knob.DYN_BATCH_SIZE)
    assert (failed.recommended, failed.reason) == (25_000, TuneReason.FAILED_CALLS)
