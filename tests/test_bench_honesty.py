"""The benches judge against worlds of their own and count every failure: `bench.autotune`'s simulated world is
not the tuner's line and its proxy punishes oversized calls; `bench.oom_risk` counts a run that timed out or died
unrecognised as a miss in recall, and its recordings keep what judging them again needs."""

import random
from dataclasses import replace

import pytest

from bench.autotune import ROOMY, TIGHT, SlowProxy, World
from bench.oom_risk import figures, record, recorded
from opsd.config.thresholds import OOM_RISK_TARGET
from opsd.observe.failures import memory_pool


def _seconds(world: World, rows: int) -> float:
    """A batch's noiseless seconds."""
    return sum(replace(world, noise=0.0, stall_probability=0.0).phases(rows, random.Random(0))[0].values())


def test_the_simulated_batch_costs_are_not_the_tuners_line():
    """Twice the rows cost more than twice the per-row time (the transformation), reads cost in steps per call: a
    line through two sizes mispredicts a third."""
    small, middle, large = (_seconds(ROOMY, r) for r in (100_000, 300_000, 600_000))
    slope = (middle - small) / 200_000
    assert large > middle + slope * 300_000 * 1.1
    assert _seconds(ROOMY, 65_537) - _seconds(ROOMY, 65_536) >= ROOMY.read_call_seconds * 0.99


def test_memory_binds_before_time_in_the_tight_world_and_not_in_the_roomy_one():
    assert TIGHT.safe_rows(OOM_RISK_TARGET) < TIGHT.ideal_rows()
    assert ROOMY.safe_rows(OOM_RISK_TARGET) > ROOMY.ideal_rows()
    assert TIGHT.peak(TIGHT.safe_rows(OOM_RISK_TARGET)) <= OOM_RISK_TARGET * TIGHT.memory_limit


def test_the_simulated_proxy_punishes_oversized_calls_so_bigger_is_not_always_better():
    rate = {n: n / SlowProxy.call_seconds(n) for n in (50_000, 70_000, 100_000)}
    assert rate[70_000] > rate[50_000] > rate[100_000]


def _judged(outcome: str, risk: float) -> dict:
    return {"outcome": outcome, "risk": risk, "predicted": None, "observed": None, "fitted": False}


def test_a_run_that_timed_out_or_died_unrecognised_is_a_miss_in_recall():
    runs = [_judged("oom:jvm_heap", 1.2), _judged("failed", 0.4), _judged("completed", 0.5)]
    found = figures(runs)
    assert (found["recall"], found["other_failures"], found["oom_runs"]) == (0.5, 1, 1)


def test_a_recording_keeps_what_judging_it_again_needs(tmp_path):
    failure = "Traceback\n  at x.Y.z(Y.java:1)\n" * 50 + "Caused by: java.lang.OutOfMemoryError: Java heap space"
    usage = {"pools": {"jvm_heap": {"peak_bytes": 1.5e8 + 0.3, "baseline_bytes": 0.0, "sampled": False}},
             "execution_bytes": 0.0, "spilled": False}
    raw = [{"shape": "to_pandas/100B", "mib": 12.0, "rows": 1000, "batch_bytes": 12582912.4, "idle": {"direct": 1.2},
            "seconds": 1.0, "failure": failure, "usage": usage}]
    path = tmp_path / "r.jsonl"
    record(raw, path)
    again = recorded(path)[0]
    assert memory_pool(again["failure"]) == memory_pool(failure) == "jvm_heap"
    assert len(again["failure"]) < len(failure) / 10
    assert again["usage"]["pools"]["jvm_heap"]["peak_bytes"] == pytest.approx(1.5e8, abs=1)
    assert again["batch_bytes"] == 12582912
