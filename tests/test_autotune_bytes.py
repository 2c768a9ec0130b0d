"""Memory in bytes, with plain data: the OOM check's safe byte cap holds whatever the rows' width while its safe row
cap does not, the planned batch honours the byte cap, and the tuner guards memory with `max_bytes_per_partition`
(set, cut, raised within the safe cap, cut after a memory failure and kept below it) while the row cap follows the
batch duration."""

from __future__ import annotations

from dataclasses import replace

import pytest

from opsd.checks.autotune.decide import Direction, TunerMemory, decide, remember
from opsd.checks.autotune.evaluate import evaluate as evaluate_tuner
from opsd.checks.autotune.facts import Facts
from opsd.checks.oom.evaluate import Observation, PlannedBatch
from opsd.checks.oom.evaluate import evaluate as evaluate_oom
from opsd.config.models import AutotuneSettings
from opsd.observe.progress import BatchSummary
from opsd.results.autotune import Knob
from tests.support.oom import oom_verdict

MB = 1024 * 1024
LIMIT = 512 * MB
SETTINGS = AutotuneSettings()
NEW = TunerMemory()
OOM_TEXT = "java.lang.OutOfMemoryError: Java heap space"
#: Heap peaks measured at 100 MB + 3 bytes per batch byte, batches of 20..180 MB.
HEAP = [Observation(i, s * MB, 100 * MB + 3 * s * MB) for i, s in enumerate((20, 60, 100, 140, 180))]


def oom(rows_per_partition: int, bytes_per_row: float, *, max_rows: int | None = None, max_bytes: int | None = None):
    """The OOM check's verdict for two partitions of `rows_per_partition` rows waiting, under the caps."""
    rows = min(rows_per_partition, max_rows or rows_per_partition)  # the row cap, as `planned_batch` applies it
    batch = PlannedBatch({("//q", 0): rows, ("//q", 1): rows}, bytes_per_row, max_rows, max_bytes)
    return evaluate_oom("q", batch, {"jvm_heap": LIMIT}, {"jvm_heap": HEAP})


class TestTheOomCheckInBytes:
    def test_rows_ten_times_wider_cut_the_safe_row_cap_tenfold_and_leave_the_safe_byte_cap(self):
        narrow, wide = oom(10_000, 100), oom(10_000, 1000)
        assert narrow.safe_max_rows_per_partition == pytest.approx(10 * wide.safe_max_rows_per_partition, rel=0.01)
        assert narrow.safe_max_bytes_per_partition == wide.safe_max_bytes_per_partition > 0

    def test_the_planned_batch_is_cut_by_the_byte_cap_per_partition(self):
        batch = oom(100_000, 1000, max_bytes=10 * MB).batch
        assert batch.bytes == 2 * 10 * MB
        assert oom(100_000, 1000).batch.bytes == 2 * 100_000 * 1000
        assert oom(10, 1000, max_bytes=10 * MB).batch.bytes == 2 * 10 * 1000  # the rows, when fewer
        assert oom(10, 1000, max_bytes=10).batch.bytes == 2 * 1000  # a row wider than the cap is read alone

    def test_a_byte_cap_judged_on_narrow_rows_keeps_wide_rows_safe_where_the_row_cap_does_not(self):
        narrow = oom(200_000, 100)
        rows, max_bytes = narrow.safe_max_rows_per_partition, narrow.safe_max_bytes_per_partition
        backlog = 10 * rows  # rows waiting in each partition
        assert oom(backlog, 100, max_rows=rows).risk <= narrow.target_risk + 1e-9
        assert oom(backlog, 1000, max_rows=rows).risk > 1.0  # the same row cap, rows 10x wide: out of memory
        assert oom(backlog, 1000, max_rows=rows, max_bytes=max_bytes).risk <= narrow.target_risk + 1e-9

    def test_data_weight_and_arrow_bytes_differ_by_the_samples_ratio(self):
        batch = PlannedBatch({("//q", 0): 1000}, 200, None, 100 * 1000, arrow_per_weight=2.0)
        assert batch.bytes == 200 * 1000  # 1000 rows of 200 Arrow bytes = 200 KB of Arrow: under 2 x 100 KB
        verdict = evaluate_oom("q", replace(batch, max_bytes_per_partition=None), {"jvm_heap": LIMIT},
                               {"jvm_heap": HEAP})
        plain = evaluate_oom("q", replace(batch, max_bytes_per_partition=None, arrow_per_weight=1.0),
                             {"jvm_heap": LIMIT}, {"jvm_heap": HEAP})
        assert verdict.safe_max_bytes_per_partition == pytest.approx(plain.safe_max_bytes_per_partition / 2, abs=1)


def facts(*, rows: int | None = 10_000, max_bytes: int | None = None, safe_bytes: int | None = 64 * MB,
          risk: float | None = 0.3, failure: str | None = None, found: tuple[BatchSummary, ...] = ()) -> Facts:
    return Facts("q", "apply", rows, None, found or tuple(BatchSummary(i, 2 * rows, rows, 2.0) for i in range(3)),
                 trigger_interval_seconds=10.0, backlog_rows=1_000_000,
                 oom=oom_verdict(risk, 5_000, safe_bytes) if risk is not None else None, failure=failure,
                 failed_run=failure and "run-1",
                 max_bytes_per_partition=max_bytes)


def decisions(f: Facts, memory: TunerMemory = NEW, settings: AutotuneSettings = SETTINGS):
    return {d.knob: d for d in decide(evaluate_tuner(f, settings), memory, settings)}


class TestTheTunersByteCap:
    def test_the_safe_byte_cap_becomes_the_byte_cap_at_once(self):
        d = decisions(facts(max_bytes=None))[Knob.MAX_BYTES]
        assert (d.current, d.recommended, d.reason) == (None, 64 * MB, "memory_bound")

    def test_a_byte_cap_over_the_safe_one_is_cut_to_it(self):
        d = decisions(facts(max_bytes=256 * MB))[Knob.MAX_BYTES]
        assert (d.direction, d.recommended, d.reason) == (Direction.DOWN, 64 * MB, "safe_cap")

    def test_room_under_the_safe_cap_raises_by_a_bounded_step_and_small_differences_hold(self):
        up = decisions(facts(max_bytes=8 * MB))[Knob.MAX_BYTES]
        assert (up.direction, up.recommended, up.reason) == (Direction.UP, 16 * MB, "memory_headroom")
        near = decisions(facts(max_bytes=60 * MB))[Knob.MAX_BYTES]
        assert (near.direction, near.reason) == (Direction.HOLD, "within_safe_cap")

    def test_without_a_memory_model_the_byte_cap_holds(self):
        d = decisions(facts(max_bytes=8 * MB, safe_bytes=None, risk=None))[Knob.MAX_BYTES]
        assert (d.direction, d.reason) == (Direction.HOLD, "no_memory_model")

    def test_a_memory_failure_cuts_the_byte_cap_and_later_raises_stay_below_it(self):
        f = facts(max_bytes=64 * MB, failure=OOM_TEXT)
        found = decisions(f)
        assert (found[Knob.MAX_BYTES].recommended, found[Knob.MAX_BYTES].reason) == (32 * MB, "memory_failure")
        memory = remember(TunerMemory(), tuple(found.values()), evaluate_tuner(f, SETTINGS), applied=True)
        assert memory.bytes_ceiling == 64 * MB
        later = decisions(facts(max_bytes=32 * MB, safe_bytes=512 * MB, failure=OOM_TEXT), memory)[Knob.MAX_BYTES]
        assert later.recommended <= 32 * MB  # the failure was handled once; the safe cap stays below the ceiling

    def test_with_a_byte_cap_in_force_the_row_cap_follows_the_duration_not_the_memory(self):
        risky = facts(rows=80_000, max_bytes=32 * MB, risk=0.95, safe_bytes=16 * MB,
                      found=tuple(BatchSummary(i, 160_000, 80_000, 2.0) for i in range(3)))
        found = decisions(risky)
        assert found[Knob.MAX_ROWS].direction == Direction.HOLD  # not cut: a risky batch is the byte cap's to cut
        assert (found[Knob.MAX_BYTES].recommended, found[Knob.MAX_BYTES].reason) == (16 * MB, "safe_cap")
        without = decisions(replace(risky, max_bytes_per_partition=None))  # no byte cap yet: rows are cut too
        assert (without[Knob.MAX_ROWS].direction, without[Knob.MAX_ROWS].reason) == (Direction.DOWN, "oom_risk")

    def test_the_byte_cap_can_be_left_to_the_user(self):
        assert Knob.MAX_BYTES not in decisions(facts(), settings=AutotuneSettings(byte_cap=False))
