"""How a failed insert call of the `yt` sink is told apart in Spark's failure text.

The auto-tuner changes `dynBatchSize` on the evidence of the sink's own insert calls only (a failure in the source,
a transform or the driver says nothing about the rows per call). A task whose insert call fails takes its write
statistics with it, so the sink marks the error instead: `mark` adds a note (PEP 678) that the worker's traceback,
and so Spark's failure text, carries; opsd reads it with `opsd.observe.failures.insert_call_failed`.
"""

from __future__ import annotations

#: The note's opening words: what opsd looks for. One definition for the sink and opsd.
INSERT_CALL_FAILED = "yt sink: an insert call failed"


def mark(error: BaseException, path: str, rows: int, size: int) -> None:
    """Note on `error` that it is the failure of an insert call of `rows` rows into `path` (rows per call `size`)."""
    error.add_note(f"{INSERT_CALL_FAILED}: {rows} rows into {path} (dynBatchSize {size})")
