"""The parts a task measures (`streaming_core.phases`): waits apart from decoding, stored one attribute per task in
a document that never grows, read back by batch with damaged records ignored."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from streaming_core.cluster.timing import DECODE
from streaming_core.phase_timing import TaskClock, read_batch_records, record_read, record_sink
from streaming_core.phases import SLOTS, TaskTimes, batch_records, phases_path


def _slow_batches(wait: float, decode: float, count: int, slept: dict[str, float]) -> Iterator[int]:
    """`count` items, each after `wait` seconds of waiting and `decode` of decoding; what each took is added to
    `slept` (a busy machine oversleeps: the test compares the clock with what was slept, not with what was asked)."""
    for i in range(count):
        started = time.perf_counter()
        time.sleep(wait)
        slept["wait"] += time.perf_counter() - started
        started = time.perf_counter()
        with DECODE.timing():
            time.sleep(decode)
        slept["decode"] += time.perf_counter() - started
        yield i


def test_a_task_clock_counts_the_waits_apart_from_the_decoding_inside_them():
    clock, slept = TaskClock(), {"wait": 0.0, "decode": 0.0}
    started = time.perf_counter()
    assert list(clock.timed(_slow_batches(0.02, 0.03, 3, slept))) == [0, 1, 2]
    elapsed = time.perf_counter() - started
    assert clock.decoding == pytest.approx(slept["decode"], abs=0.002)
    assert slept["wait"] <= clock.waiting <= elapsed - clock.decoding + 1e-6


def test_a_sink_task_spends_in_the_sink_what_it_did_not_wait_for_upstream():
    clock, slept, inserting = TaskClock(), {"wait": 0.0, "decode": 0.0}, 0.0
    for _ in clock.timed(_slow_batches(0.03, 0, 2, slept)):
        started = time.perf_counter()
        time.sleep(0.04)
        inserting += time.perf_counter() - started
    times = clock.sink_times(5)
    assert times.upstream_wait >= slept["wait"] and times.sink_insert >= inserting
    assert times.upstream_wait + times.sink_insert == pytest.approx(times.wall, abs=0.005)


def test_records_come_back_by_batch_and_a_batch_reuses_the_slot_of_the_one_SLOTS_before(yt, yt_root):
    tuning = f"{yt_root}/tuning"
    record_read(yt, tuning, 0, TaskTimes(3, 10.0, 11.0, read_wait=0.5, decode=0.2, acknowledge=0.01))
    record_read(yt, tuning, 1, TaskTimes(3, 10.0, 11.5, read_wait=0.7))
    record_sink(yt, tuning, 3, [TaskTimes(3, 10.0, 12.0, upstream_wait=1.2, sink_insert=0.8)], 0.1)
    record_read(yt, tuning, 0, TaskTimes(3 + SLOTS, 20.0, 21.0))

    records = read_batch_records(yt, tuning)

    assert sorted(records) == [3, 3 + SLOTS]
    assert [t.read_wait for t in records[3].reads] == [0.7], "tablet 0's record of batch 3 was replaced"
    assert records[3].commit == 0.1 and records[3].sinks[0].sink_insert == 0.8
    assert records[3 + SLOTS].sinks == () and records[3 + SLOTS].commit is None
    assert len(yt.get(f"{phases_path(tuning)}/@")) <= 2 * SLOTS + 8, "one attribute per writer and slot"


@pytest.mark.hostile
def test_damaged_records_are_ignored_never_raised():
    good = {"batch_id": 1, "started": 1.0, "ended": 2.0, "read_wait": 0.5}
    attributes = {
        "read_0_1": good,
        "read_1_1": {**good, "read_wait": -1},
        "read_2_1": {**good, "batch_id": "1"},
        "read_3_1": "not a map",
        "read_4_1": {**good, "unknown": 1},
        "sink_1": {"batch_id": 1, "commit": 0.2, "tasks": [good, {"batch_id": 1}]},
        "sink_2": {"batch_id": 2, "commit": "soon", "tasks": []},
        "type": "document",
    }
    records = batch_records(attributes)
    assert list(records) == [1]
    assert [t.read_wait for t in records[1].reads] == [0.5, 0.5]
    assert records[1].sinks == () and records[1].commit is None


def test_a_query_without_a_tuning_document_records_nothing(yt, yt_root):
    record_read(yt, None, 0, TaskTimes(1, 1.0, 2.0))
    assert read_batch_records(yt, None) == {}
    assert read_batch_records(yt, f"{yt_root}/nothing") == {}
