"""Failures whose cause is memory: which pool a query's failure text blames, if any.

Pure. Spark's failure text carries the JVM's `OutOfMemoryError` (heap, or direct buffer memory), Netty's
`OutOfDirectMemoryError` (Arrow's buffers in the JVM, over `MaxDirectMemorySize`) and Arrow Java's
`OutOfMemoryException` (direct memory), a task result the driver had no heap to fetch, results over
`spark.driver.maxResultSize`, a Python `MemoryError` or a subclass (pyarrow's, numpy's: a worker over its share of
`spark.executor.pyspark.memory`), a Python worker that died without a traceback (killed by its limit or by the
kernel's OOM killer), or the driver's JVM gone from under py4j.
"""

from __future__ import annotations

import re

# Checked in order: the first that matches names the pool.
_CAUSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("direct", re.compile(r"OutOfMemoryError: (?:Direct buffer memory|Cannot reserve \d+ bytes of direct buffer)"
                          r"|arrow\.memory\.OutOfMemoryException|OutOfDirectMemoryError", re.IGNORECASE)),
    ("driver_result", re.compile(r"Total size of serialized results of \d+ tasks .* is bigger than")),
    ("jvm_heap", re.compile(r"OutOfMemoryError(?:: (?:Java heap space|GC overhead limit exceeded|"
                            r"Requested array size exceeds VM limit))?")),
    # The driver could not take a task's result from the block manager: a result too big for the heap (the
    # OutOfMemoryError itself is only in the driver's log, measured with `toPandas()` on a 512m driver).
    ("jvm_heap", re.compile(r"TaskResultLost \(result lost from block manager\)")),
    # MemoryError and its subclasses: pyarrow's ArrowMemoryError, numpy's _ArrayMemoryError ("Unable to allocate").
    ("python_worker", re.compile(r"(?m)^[\w.]*MemoryError\b|Python worker exited unexpectedly \(crashed\)"
                                 r"|worker .*killed.*(?:memory|signal 9)|exit code 137")),
    ("jvm_heap", re.compile(r"Answer from Java side is empty|Py4JNetworkError|Java gateway process exited")),
)


def memory_pool_of_failure(text: str | None) -> str | None:
    """The pool (`jvm_heap`, `direct`, `python_worker`, `driver_result`) whose exhaustion the failure text shows;
    None for other failures. A driver JVM that vanished is counted against the heap: the kernel's OOM killer is its
    usual end."""
    if not text:
        return None
    for pool, pattern in _CAUSES:
        if pattern.search(text):
            return pool
    return None
