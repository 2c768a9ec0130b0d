"""The auto-tuner's evaluate and decide steps, with plain data: the fixed point toward the target duration from the
relation around the newest operating point, memory cuts at once, a safe first batch, the one-batch delay and the
stabilisation window, no oscillation at a steady rate, and the search for rows per insert call by the insert seconds
per row at each size tried, under the rows-per-transaction limit."""

from __future__ import annotations

from dataclasses import replace

import pytest

from opsd.checks.autotune.decide import (
    Direction,
    Replan,
    TunerMemory,
    decide,
    decide_replan,
    remember,
)
from opsd.checks.autotune.evaluate import evaluate, relation
from opsd.checks.autotune.facts import Facts, Uncommitted
from opsd.config.models import AutotuneSettings
from opsd.observe.progress import BatchSummary
from opsd.results.autotune import Knob, ReplanRefusal
from streaming_core.insert_failure import INSERT_CALL_FAILED
from streaming_core.write_stats import WriteStats
from tests.support.oom import oom_verdict

SETTINGS = AutotuneSettings()
NEW = TunerMemory()
OOM_TEXT = ("org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed: "
            "java.lang.OutOfMemoryError: Java heap space")


def batches(sizes: list[int], *, cost: float = 1e-4, fixed: float = 0.5, first_id: int = 0) -> tuple[BatchSummary, ...]:
    """Batches whose duration is fixed + cost x rows of the largest partition."""
    return tuple(BatchSummary(first_id + i, 2 * n, n, fixed + cost * n) for i, n in enumerate(sizes))


def facts(cap: int | None = 10_000, found: tuple[BatchSummary, ...] = (), **changes) -> Facts:
    base = Facts("q", "apply", cap, None, found, trigger_interval_seconds=10.0, backlog_rows=1_000_000)
    return replace(base, **changes)


def rows_decision(f: Facts, memory: TunerMemory = NEW, settings: AutotuneSettings = SETTINGS):
    return next(d for d in decide(evaluate(f, settings), memory, settings) if d.knob == Knob.MAX_ROWS)


def test_the_relation_is_exact_at_the_newest_point_and_takes_the_growth_per_row_from_the_other():
    """Variable seconds 1e-9 x rows^2 over a fixed 0.5 s: per row they double with twice the rows (elasticity 1),
    which a line through the two points would miss."""
    found = tuple(BatchSummary(i, 2 * n, n, 0.5 + 1e-9 * n * n) for i, n in enumerate([20_000, 20_000, 40_000]))
    r = relation(found, fixed=0.5)
    assert (r.rows, r.elasticity) == (40_000, pytest.approx(1.0))
    assert r.rows_for(0.5 + 1e-9 * 60_000 ** 2) == 60_000


def test_the_spread_is_the_querys_noise_whichever_point_is_newest_and_the_elasticity_outlives_the_window():
    """Noisy batches at 20 000, then a steady spell at 40 000 longer than `history_batches`: the newest point's single
    batch is aimed with the older point's noise, and the 20 000 batches still say how the cost grows."""
    noisy = tuple(BatchSummary(i, 2 * 20_000, 20_000, 0.5 + 1e-9 * 20_000 ** 2 * f)
                  for i, f in enumerate([1.0, 1.2, 0.8, 1.1, 0.9, 1.0]))
    steady = tuple(BatchSummary(6 + i, 2 * 40_000, 40_000, 0.5 + 1e-9 * 40_000 ** 2) for i in range(12))
    r = relation(noisy + steady[:1], fixed=0.5, window=SETTINGS.history_batches)
    assert r.spread > 0.05 and r.elasticity == pytest.approx(1.0)
    assert relation(noisy + steady, fixed=0.5, window=SETTINGS.history_batches).elasticity == pytest.approx(1.0)


def test_batches_of_one_size_give_a_line_through_the_fixed_cost_and_one_stall_does_not_move_it():
    steady = batches([10_000] * 4, cost=1e-4, fixed=0.5)
    stalled = (*steady[:2], replace(steady[2], duration_seconds=steady[2].duration_seconds + 5.0), steady[3])
    r = relation(stalled, fixed=0.5)
    assert (r.elasticity, r.rows_for(7.0)) == (0.0, 65_000)


def test_the_aim_is_the_target_less_the_spread_of_the_batches_so_most_meet_it():
    noisy = tuple(BatchSummary(i, 2 * 50_000, 50_000, d) for i, d in enumerate([5.0, 5.5, 4.5, 5.2, 4.8]))
    rows = evaluate(facts(50_000, noisy), SETTINGS).rows
    assert rows.relation.spread > 0.05 and rows.aim_seconds < 0.95 * rows.target_seconds
    assert rows.ideal_rows < 67_000 < rows.relation.rows_for(rows.target_seconds) == 70_000


def test_a_binding_cap_with_a_backlog_is_raised_toward_the_target_by_a_bounded_step():
    small = rows_decision(facts(10_000, batches([10_000, 10_000, 10_000])))
    assert (small.direction, small.reason) == (Direction.UP, "fast_batches")
    assert 10_000 < small.recommended <= 10_000 * SETTINGS.max_step_up_unknown_risk  # while the risk is unknown


def test_raises_are_equal_steps_that_land_on_the_fixed_point_not_short_of_it():
    low_risk = oom_verdict(0.1, None)
    d = rows_decision(facts(100_000, batches([100_000] * 3, cost=2e-5), oom=low_risk))  # 2.5 s, no phases: 280 000
    assert d.recommended == pytest.approx(100_000 * 2.8 ** 0.5, abs=1)  # two raises of 1.67x, not 2x then 1.4x


def test_without_a_memory_model_a_large_cap_is_cut_to_the_blind_first_cap_before_the_first_batch():
    d = rows_decision(facts(5_000_000))
    assert (d.reason, d.recommended) == ("start_unknown_risk", SETTINGS.start_rows_per_partition)
    assert rows_decision(facts(5_000_000, oom=oom_verdict(0.1, None))).direction == Direction.HOLD
    assert rows_decision(facts(50_000)).direction == Direction.HOLD


def test_with_a_known_low_risk_the_step_is_larger_but_never_over_the_safe_cap():
    low_risk = oom_verdict(0.1, 15_000)
    d = rows_decision(facts(10_000, batches([10_000, 10_000]), oom=low_risk))
    assert d.recommended == 15_000


def test_slow_batches_are_cut_to_the_fixed_point_by_at_most_the_step_down():
    d = rows_decision(facts(100_000, batches([100_000] * 3, fixed=0.5, cost=1e-4)))  # 10.5 s > 7 s target
    assert (d.direction, d.reason) == (Direction.DOWN, "slow_batches")
    assert d.recommended == 66_667  # one size, no phases measured: a line through the origin, 7 s / 1.05e-4 s per row
    floor = rows_decision(facts(100_000, batches([100_000] * 3, fixed=0.5, cost=1e-3)))  # 100 s: ideal 7 000
    assert floor.recommended == 50_000


def test_a_cut_for_slow_batches_starts_from_the_rows_read_not_from_a_cap_that_did_not_bind():
    d = rows_decision(facts(1_000_000, batches([100_000] * 3, fixed=0.5, cost=1e-3)))
    assert (d.reason, d.recommended) == ("slow_batches", 50_000)  # half the rows read, not half the cap


def test_one_slow_batch_at_a_steady_size_is_not_cut_the_median_is():
    found = batches([60_000] * 5, cost=1e-4)  # 6.5 s against a 7 s target
    stalled = (*found[:-1], replace(found[-1], duration_seconds=9.0))
    assert rows_decision(facts(60_000, stalled)).direction == Direction.HOLD


def test_a_cap_that_does_not_bind_is_left_alone_at_a_steady_rate():
    d = rows_decision(facts(10_000, batches([3_000] * 5)))
    assert (d.direction, d.reason) == (Direction.HOLD, "cap_not_binding")


def test_near_the_fixed_point_the_hysteresis_holds_the_cap():
    d = rows_decision(facts(60_000, batches([60_000] * 5)))  # 6.5 s against 7 s: ideal 65 000, within 15 %
    assert (d.direction, d.reason) == (Direction.HOLD, "within_target")


def test_no_raise_without_a_backlog():
    d = rows_decision(facts(10_000, batches([10_000] * 3), backlog_rows=0))
    assert (d.direction, d.reason) == (Direction.HOLD, "no_backlog")


def test_without_a_trigger_interval_the_target_batch_duration_is_aimed_at():
    evaluation = evaluate(facts(10_000, batches([10_000]), trigger_interval_seconds=None), SETTINGS)
    assert evaluation.rows.target_seconds == SETTINGS.target_batch_seconds


def test_an_uncapped_query_gets_a_safe_first_cap_at_once():
    assert rows_decision(facts(None)).recommended == SETTINGS.start_rows_per_partition
    d = rows_decision(facts(None, oom=oom_verdict(0.2, 40_000)))
    assert (d.recommended, d.reason, d.direction) == (40_000, "first_batch_safe", Direction.UP)


def test_risk_over_the_threshold_cuts_at_once_even_while_stabilising_but_once_per_completed_batch():
    memory = TunerMemory(rows_changed_after=1)
    d = rows_decision(facts(80_000, batches([80_000] * 3), oom=oom_verdict(0.9, None)), memory)
    assert (d.reason, d.recommended) == ("oom_risk", 40_000)
    just_cut = TunerMemory(rows_changed_after=2)
    assert rows_decision(facts(40_000, batches([80_000] * 3), oom=oom_verdict(0.9, None)), just_cut).reason == \
        "stabilising"


def test_a_memory_failure_cuts_below_the_largest_batch_once_and_caps_later_raises():
    f = facts(None, batches([200_000, 200_000]), failure=OOM_TEXT, failed_run="run-1")
    d = rows_decision(f)
    assert (d.reason, d.recommended) == ("memory_failure", 100_000)
    memory = remember(TunerMemory(), (d,), evaluate(f, SETTINGS), applied=True)
    assert memory.rows_ceiling == 200_000 and memory.handled_failure == "run-1"
    # The same failure is not cut twice; later raises stay under memory_cut x the ceiling.
    again = facts(100_000, batches([100_000] * 6, cost=1e-6, first_id=10), failure=OOM_TEXT, failed_run="run-1")
    assert rows_decision(again, replace(memory, rows_changed_after=None)).recommended == 100_000


def test_a_change_waits_for_batches_planned_after_it_the_one_batch_delay():
    memory = TunerMemory(rows_changed_after=4)
    found = batches([55_000] * 7)  # ids 0..6: batch 5 was planned before the change, 6 after it; 6 s: 64 000 meet 7 s
    assert rows_decision(facts(55_000, found), memory).reason == "stabilising"
    more = batches([55_000] * 8)  # id 7: the second batch planned after the change (stabilisation_batches = 2)
    assert rows_decision(facts(55_000, more), memory).reason == "fast_batches"


def test_far_under_the_fixed_point_one_batch_at_the_new_cap_is_enough_for_the_next_bounded_raise():
    memory = TunerMemory(rows_changed_after=4)
    found = batches([200_000] * 7, cost=1e-5)  # 2.5 s: the fixed point is more than one step away
    d = rows_decision(facts(200_000, found), memory)
    assert d.reason == "fast_batches" and d.recommended <= 200_000 * SETTINGS.max_step_up_unknown_risk
    assert rows_decision(facts(200_000, found[:-1]), memory).reason == "stabilising"  # none at the new cap yet


def test_the_operating_point_is_the_newest_cap_not_an_older_one_nearby():
    """Three batches at 56 000 over the target, then three at 52 000 within it: the 52 000 ones decide."""
    older = tuple(BatchSummary(i, 2 * 56_000, 56_000, 7.6) for i in range(3))
    newer = tuple(BatchSummary(3 + i, 2 * 52_000, 52_000, 6.5) for i in range(3))
    assert rows_decision(facts(52_000, older + newer)).direction == Direction.HOLD


def test_the_fixed_point_converges_and_then_stops_changing():
    cap, memory, changes = 5_000, TunerMemory(), 0
    history: list[BatchSummary] = []
    for batch_id in range(60):
        history.append(BatchSummary(batch_id, cap, cap, 0.5 + 1e-4 * cap))
        f = facts(cap, tuple(history[-10:]), oom=oom_verdict(0.1, None))
        decisions = decide(evaluate(f, SETTINGS), memory, SETTINGS)
        memory = remember(memory, decisions, evaluate(f, SETTINGS), applied=True)
        d = decisions[0]
        if d.direction != Direction.HOLD:
            changes += 1
            cap = d.recommended
    assert 0.85 * 65_000 <= cap <= 65_000 and changes <= 6


def test_only_a_memory_failure_gets_its_planned_batch_planned_again_and_a_refusal_keeps_its_reason():
    planned = facts(10_000, failure=OOM_TEXT, failed_run="r", uncommitted=Uncommitted(7, 20_000))
    assert decide_replan(evaluate(planned, SETTINGS), 5_000) == Replan("q", 7, None)
    refused = replace(planned, uncommitted=Uncommitted(7, 20_000, ReplanRefusal.STATEFUL))
    assert decide_replan(evaluate(refused, SETTINGS), 5_000) == Replan("q", 7, ReplanRefusal.STATEFUL)
    other = replace(planned, failure="java.net.ConnectException: Connection refused")
    assert decide_replan(evaluate(other, SETTINGS), 5_000) is None  # the same range may well pass next time
    assert decide_replan(evaluate(replace(planned, uncommitted=None), SETTINGS), 5_000) is None
    assert decide_replan(evaluate(replace(planned, reads_queue=False), SETTINGS), 5_000) is None


def test_a_batch_is_planned_again_only_when_the_cap_now_makes_it_smaller():
    planned = facts(10_000, failure=OOM_TEXT, failed_run="r", uncommitted=Uncommitted(7, 20_000))
    assert decide_replan(evaluate(planned, SETTINGS), 19_999) is not None
    assert decide_replan(evaluate(planned, SETTINGS), 20_000) is None  # it would be planned the same
    assert decide_replan(evaluate(planned, SETTINGS), None) is None  # uncapped: it could grow
    unknown = replace(planned, uncommitted=Uncommitted(7, None))
    assert decide_replan(evaluate(unknown, SETTINGS), 5_000) is None


#: Spark's failure text of a task whose insert call failed (the sink's note), and of one whose source failed.
INSERT_FAILED = ("org.apache.spark.SparkException: Job aborted.\nTraceback (most recent call last):\n  ...\n"
                 "streaming_core.cluster.errors.ClusterError: //out: tablet transaction conflict\n"
                 f"{INSERT_CALL_FAILED}: 5000 rows into //out (dynBatchSize 50000)\n")
SOURCE_FAILED = ("org.apache.spark.SparkException: Job aborted.\nTraceback (most recent call last):\n  ...\n"
                 "streaming_core.cluster.errors.TrimmedRowsError: //q partition 0: rows [0, 10) were trimmed\n")


def write_decision(stats: WriteStats | None, size: int = 50_000, memory: TunerMemory = NEW,
                   failure: str | None = None):
    f = Facts("q", "apply", None, size, write=stats, dyn_batch_size_ceiling=100_000, failure=failure)
    return next(d for d in decide(evaluate(f, SETTINGS), memory, SETTINGS) if d.knob == Knob.DYN_BATCH_SIZE)


def stats(calls: int = 4, rows: int = 200_000, slowest: float = 0.5, size: int = 50_000, **changes) -> WriteStats:
    return replace(WriteStats(calls, rows, slowest * calls, slowest, size, batch_id=7), **changes)


def test_full_calls_try_larger_calls_up_to_the_transaction_limit():
    d = write_decision(stats())
    assert (d.recommended, d.reason) == (75_000, "call_size_tried")  # x dyn_batch_size_step_up
    top = write_decision(stats(size=95_000, rows=380_000), size=95_000)
    assert (top.recommended, top.reason) == (100_000, "call_size_tried")


def searched(cost, start: int = 50_000, batches: int = 20) -> list[int]:
    """The sizes the tuner uses batch after batch against a proxy whose insert seconds per row at a size are
    `cost(size)` (full calls, 4 per batch)."""
    size, memory, used = start, TunerMemory(), []
    for batch_id in range(batches):
        used.append(size)
        seconds = cost(size) * 4 * size
        written = WriteStats(4, 4 * size, seconds, seconds / 4, size, batch_id=batch_id)
        f = Facts("q", "apply", None, size, write=written, dyn_batch_size_ceiling=100_000, reads_queue=False)
        evaluation = evaluate(f, SETTINGS)
        decisions = decide(evaluation, memory, SETTINGS)
        memory = remember(memory, decisions, evaluation, applied=True)
        size = next(d.recommended for d in decisions if d.knob == Knob.DYN_BATCH_SIZE)
    return used


def test_a_proxy_that_punishes_oversized_calls_is_searched_to_its_best_size_and_the_search_ends():
    """Per row: 0.1 s per call over the rows, plus 1 us a row, 4x that past 70 000 rows (bigger is not better)."""
    used = searched(lambda n: 0.1 / n + 1e-6 * (1 if n <= 70_000 else 4))
    assert used[:2] == [50_000, 75_000]  # tried larger, found slower per row: bisects below it
    assert 61_000 <= used[-1] <= 70_000 and len(set(used[-8:])) == 1  # settled under the penalty, and stays


def test_where_bigger_calls_always_cost_less_per_row_the_search_ends_at_the_limit():
    used = searched(lambda n: 0.1 / n + 1e-6)
    assert used[:4] == [50_000, 75_000, 100_000, 87_500]  # one probe below the best, halfway to the next size tried
    assert set(used[4:]) == {100_000}


def test_slow_calls_failed_insert_calls_and_retries_halve_the_rows_per_call():
    assert (write_decision(stats(slowest=6.0)).recommended, write_decision(stats(slowest=6.0)).reason) == \
        (25_000, "slow_calls")
    assert write_decision(stats(errors=1), failure=INSERT_FAILED).reason == "failed_calls"
    assert write_decision(stats(retries=2)).recommended == 25_000
    first_call_failed = write_decision(stats(calls=0, rows=0, errors=2), failure=INSERT_FAILED)
    assert (first_call_failed.recommended, first_call_failed.reason) == (25_000, "failed_calls")


@pytest.mark.parametrize("failure", [None, SOURCE_FAILED])
def test_tasks_that_failed_elsewhere_never_move_the_rows_per_call(failure: str | None):
    """The source failed (the issue's `reason=failed_calls calls=0 rows=0 errors=2`): no insert call says anything."""
    before_any_call = write_decision(stats(calls=0, rows=0, errors=2), failure=failure)
    after_some_calls = write_decision(stats(errors=1), failure=failure)

    assert before_any_call.recommended == after_some_calls.recommended == 50_000
    assert after_some_calls.reason == "tasks_failed_elsewhere"


def test_partial_calls_and_statistics_of_an_older_value_or_batch_hold():
    assert write_decision(stats(calls=4, rows=40_000)).reason == "calls_not_full"
    assert write_decision(stats(size=40_000)).reason == "no_new_writes"
    assert write_decision(stats(), memory=TunerMemory(judged_write_batch=7)).reason == "no_new_writes"
    assert write_decision(None).direction == Direction.HOLD
