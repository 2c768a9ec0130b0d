"""Callables that opsd pipelines in the tests name as `tests.support.pipelines:<function>`.

opsd loads them by reference, so their knobs are module-level state that a test sets before starting a
pipeline (and the `reset` fixture of the test module puts back). They run in the driver process: a
transform when the query is built, a `foreachBatch` function for each micro-batch.
"""

from __future__ import annotations

import time
from pathlib import Path

from pyspark.sql import DataFrame


class Knobs:
    """What the callables below do; `reset()` restores the defaults."""

    transform_failures_left = 0
    transform_calls = 0
    batch_failures_left = 0
    batch_seconds = 3.0
    batch_log: Path | None = None

    @classmethod
    def reset(cls) -> None:
        cls.transform_failures_left = 0
        cls.transform_calls = 0
        cls.batch_failures_left = 0
        cls.batch_seconds = 3.0
        cls.batch_log = None


def flaky_transform(df: DataFrame) -> DataFrame:
    """Raises on the first `Knobs.transform_failures_left` starts of the query, then passes rows through."""
    Knobs.transform_calls += 1
    if Knobs.transform_failures_left > 0:
        Knobs.transform_failures_left -= 1
        raise RuntimeError("flaky_transform: failing on purpose")
    return df


def failing_batch(df: DataFrame, batch_id: int) -> None:
    """A sink whose first `Knobs.batch_failures_left` micro-batches fail (the query fails while running)."""
    if Knobs.batch_failures_left > 0:
        Knobs.batch_failures_left -= 1
        raise ConnectionError(f"failing_batch: batch {batch_id} fails on purpose (a failure that can pass)")
    df.count()


def slow_batch(df: DataFrame, batch_id: int) -> None:
    """A sink whose batches take `Knobs.batch_seconds`; logs `start <id>` and `end <id>` to `Knobs.batch_log`."""
    log = Knobs.batch_log
    if log is None:
        raise RuntimeError("slow_batch needs Knobs.batch_log")
    with log.open("a") as f:
        f.write(f"start {batch_id}\n")
    time.sleep(Knobs.batch_seconds)
    df.count()
    with log.open("a") as f:
        f.write(f"end {batch_id}\n")


#: Rows per task above which `memory_bound` fails as a worker out of memory would.
MEMORY_BOUND_ROWS = 1500


def memory_bound(df: DataFrame) -> DataFrame:
    """`data, n` of each row, in Python workers that raise `MemoryError` on a task of more than
    `MEMORY_BOUND_ROWS` rows: a batch too big for its memory, without taking the test's memory."""

    def rows(batches):
        held = list(batches)
        if sum(b.num_rows for b in held) > MEMORY_BOUND_ROWS:
            raise MemoryError(f"memory_bound: a task of more than {MEMORY_BOUND_ROWS} rows")
        yield from held

    return df.select("data", "n").mapInArrow(rows, "data string, n long")
