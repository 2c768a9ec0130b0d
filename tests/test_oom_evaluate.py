"""The OOM-risk model: the robust online fit, the prediction for the planned batch, the safe cap, the finding."""

import pytest

from opsd.checks.oom.evaluate import (
    ModelSettings,
    Observation,
    PlannedBatch,
    Prior,
    evaluate,
    finding,
    fit,
    planned_batch,
)
from opsd.observe.progress import PartitionOffsets

MB = 1024 * 1024
LIMIT = 512 * MB


def _batch(*rows, cap=None):
    """A planned batch of one queue, 100 bytes a row, with these rows per partition."""
    return PlannedBatch({("//q", i): r for i, r in enumerate(rows)}, 100, cap)


def _line(sizes, base=100 * MB, slope=3.0):
    return [Observation(i, s, base + slope * s) for i, s in enumerate(sizes)]


def test_before_any_observation_the_conservative_prior_predicts():
    model = fit([], LIMIT, ModelSettings(prior=Prior(base_fraction=0.3, bytes_per_batch_byte=8.0)))
    assert model.observations == 0
    assert model.predict(10 * MB) == pytest.approx(0.3 * LIMIT + 80 * MB)


def test_batches_on_a_line_give_back_that_line():
    model = fit(_line([10 * MB, 20 * MB, 40 * MB]), LIMIT)
    assert model.base == pytest.approx(100 * MB, rel=1e-6)
    assert model.slope == pytest.approx(3.0, rel=1e-6)


def test_one_outlier_barely_moves_the_fit():
    seen = [*_line([10 * MB, 20 * MB, 30 * MB, 40 * MB, 50 * MB]), Observation(5, 30 * MB, 400 * MB)]
    model = fit(seen, LIMIT)
    assert model.slope == pytest.approx(3.0, rel=0.05)
    assert model.predict(60 * MB) == pytest.approx(280 * MB, rel=0.05)


def test_recent_batches_weigh_more_than_old_ones():
    old = [Observation(i, s, 50 * MB + 1.0 * s) for i, s in enumerate([10 * MB, 20 * MB, 30 * MB])]
    new = [Observation(100 + i, s, 50 * MB + 4.0 * s) for i, s in enumerate([10 * MB, 20 * MB, 30 * MB])]
    assert fit(old + new, LIMIT, ModelSettings(half_life_batches=5)).slope == pytest.approx(4.0, rel=0.05)


def test_batches_of_one_size_keep_the_prior_slope_and_anchor_the_base():
    seen = [Observation(i, 10 * MB, 200 * MB) for i in range(3)]
    model = fit(seen, LIMIT, ModelSettings(prior=Prior(bytes_per_batch_byte=8.0)))
    assert model.slope == 8.0
    assert model.predict(10 * MB) == pytest.approx(200 * MB)


def test_a_batch_that_died_of_the_pool_counts_as_a_peak_at_its_limit():
    seen = [*_line([10 * MB, 20 * MB]), Observation(2, 60 * MB, 0.0, failed=True)]
    assert fit(seen, LIMIT).predict(60 * MB) >= 0.9 * LIMIT


def test_the_planned_batch_follows_the_sources_cap_rule_per_queue():
    read = [PartitionOffsets("//a", 0, None, 99, 1099), PartitionOffsets("//a", 1, None, 499, 549),
            PartitionOffsets("//a", 2, None, 10, 10), PartitionOffsets("//b", 0, None, -1, 999),
            PartitionOffsets("//b", 1, None, None, 999)]
    batch = planned_batch(read, 300, bytes_per_row=100)
    assert batch.rows_per_partition == {("//a", 0): 300, ("//a", 1): 50, ("//a", 2): 0, ("//b", 0): 300}
    assert batch.bytes == 65_000
    assert planned_batch(read, None, 1).rows == 1000 + 50 + 1000


def test_risk_is_the_predicted_peak_over_the_limit_and_the_safe_cap_keeps_it_under_the_target():
    batch = _batch(1_000_000, 1_000_000, cap=1_000_000)
    seen = {"jvm_heap": _line([10 * MB, 20 * MB, 40 * MB])}
    result = evaluate("q", batch, {"jvm_heap": LIMIT}, seen, target_risk=0.7)
    heap = result.pools[0]
    assert heap.predicted_peak_bytes == pytest.approx(100 * MB + 3.0 * 200_000_000, rel=1e-6)
    assert result.risk == pytest.approx(heap.predicted_peak_bytes / LIMIT)
    assert heap.observed_peak_bytes == pytest.approx(100 * MB + 3.0 * 40 * MB)
    cap = result.safe_max_rows_per_partition
    at_cap = evaluate("q", _batch(cap, cap, cap=cap), {"jvm_heap": LIMIT}, seen)
    over_cap = evaluate("q", _batch(cap + 1, cap + 1, cap=cap), {"jvm_heap": LIMIT}, seen)
    assert at_cap.risk <= 0.7 < over_cap.risk


def test_pools_without_a_limit_are_not_judged():
    batch = _batch(10)
    result = evaluate("q", batch, {"jvm_heap": LIMIT, "python_worker": 0}, {})
    assert [p.pool for p in result.pools] == ["jvm_heap"]


def test_the_finding_names_the_pool_and_the_cap_only_when_the_risk_is_over_the_target():
    seen = {"jvm_heap": _line([10 * MB, 20 * MB, 40 * MB])}
    big = evaluate("q", _batch(2_000_000, cap=2_000_000), {"jvm_heap": LIMIT}, seen)
    small = evaluate("q", _batch(1000, cap=2_000_000), {"jvm_heap": LIMIT}, seen)
    text = finding(big)
    assert "jvm_heap" in text and f"max_rows_per_partition <= {big.safe_max_rows_per_partition}" in text
    assert finding(small) is None


def test_state_held_in_the_heap_adds_to_the_heaps_prediction_whatever_the_batch():
    seen = {"jvm_heap": [Observation(i, s, 100 * MB + 3.0 * s + 50 * MB, state_bytes=50 * MB)
                         for i, s in enumerate([10 * MB, 20 * MB, 40 * MB])]}
    batch = _batch(100_000)
    grown = evaluate("q", batch, {"jvm_heap": LIMIT}, seen, state_bytes=200 * MB)
    assert grown.pools[0].predicted_peak_bytes == pytest.approx(100 * MB + 3.0 * 10_000_000 + 200 * MB, rel=1e-6)
