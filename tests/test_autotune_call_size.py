"""The search for rows per insert call (`opsd.checks.autotune.call_size`): sizes judged by their median insert seconds
per row, larger steps until a size is slower, then bisection, a failed size as a bound, old evidence forgotten."""

from __future__ import annotations

import math

from opsd.checks.autotune.call_size import MEMORY_BATCHES, SAMPLES_PER_SIZE, CallSample, Step, costs, kept, next_size

LOW, HIGH, UP, TOLERANCE = 1_000, 100_000, 1.5, 0.15


def test_a_size_costs_the_median_of_its_newest_samples_so_one_slow_batch_does_not_decide():
    samples = [CallSample(1, 50_000, 1e-6), CallSample(2, 50_000, 9e-6), CallSample(3, 50_000, 1.2e-6)]
    assert costs(samples) == {50_000: 1.2e-6}


def test_only_the_newest_samples_per_size_and_of_recent_batches_are_kept():
    many = [CallSample(i, 50_000, 1e-6) for i in range(10)] + [CallSample(0, 75_000, 1e-6)]
    assert [s.batch_id for s in kept(many, newest=9) if s.size == 50_000] == list(range(10 - SAMPLES_PER_SIZE, 10))
    assert all(s.size == 50_000 for s in kept(many, newest=MEMORY_BATCHES))  # the 75 000 one is forgotten
    assert kept(many, newest=-1) == ()  # a new checkpoint's batch ids start again: nothing of the old one holds


def test_larger_until_slower_then_halfway_and_settled_within_the_tolerance():
    assert next_size({50_000: 2e-6}, LOW, HIGH, UP, TOLERANCE) == (75_000, Step.LARGER)
    assert next_size({50_000: 2e-6, 75_000: 3e-6}, LOW, HIGH, UP, TOLERANCE) == (62_500, Step.BETWEEN)
    below = {50_000: 2e-6, 75_000: 3e-6, 56_000: 2.5e-6}  # bracketed above within the tolerance
    assert next_size(below, LOW, HIGH, UP, TOLERANCE) == (33_333, Step.SMALLER)  # nothing tried below the best
    settled = {50_000: 2e-6, 55_000: 3e-6, 45_000: 2.5e-6}
    assert next_size(settled, LOW, HIGH, UP, TOLERANCE) == (50_000, Step.SETTLED)


def test_the_search_stays_within_the_bounds():
    assert next_size({90_000: 1e-6}, LOW, HIGH, UP, TOLERANCE) == (100_000, Step.LARGER)
    top = {100_000: 1e-6, 90_000: 2e-6}
    assert next_size(top, LOW, HIGH, UP, TOLERANCE) == (100_000, Step.SETTLED)
    assert next_size({1_000: 1e-6, 1_100: 2e-6}, LOW, HIGH, UP, TOLERANCE) == (1_000, Step.SETTLED)


def test_a_size_whose_calls_failed_bounds_the_search_from_above():
    failed = {80_000: math.inf, 40_000: 2e-6}
    assert next_size(failed, LOW, HIGH, UP, TOLERANCE) == (60_000, Step.BETWEEN)  # never 80 000 or above again
