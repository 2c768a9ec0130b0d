"""Spark's failure text, read in one place for every reader: which exception it is, the product's own error inside
Spark's wrappers, whether a restart can help (permanent or transient), whether the driver's JVM is gone, and whether
memory ran out (and of which pool).

Readers: the recorder (`exception_class`, the bounded `exception` metric label; `failure_message`, the one-line
error of `/status`), the runner's supervisor (`classify`: stop for good, exit, or restart with backoff), the OOM check
(`memory_pool`: the pool a failure blames) and the auto-tuner (`out_of_memory`: cut the cap after a failure of
memory; `insert_call_failed`: halve `dynBatchSize` after a failed insert call). Pure: functions of the text (or of a
Python exception, as the runner catches it).

- **Permanent**: a restart replays it unchanged: a configuration or code error (a transform module that does not
  exist, an unknown source option, a sink table that does not exist or does not fit, SQL that does not analyse) or a
  checkpoint that can no longer be replayed. Restarting those for ever hides the cause behind a crash loop, so the
  supervisor stops the pipeline and says why. Everything else (a lost executor, an unreachable proxy, a conflict,
  memory) may pass, and is retried with backoff.
- **Driver gone**: Py4J lost the driver's JVM, or its SparkContext was stopped: nothing in this process can start a
  query again. In local mode a driver that died of memory takes the JVM along (the kernel's OOM killer is its usual
  end), so the OOM check counts a lost JVM against the heap.
- **Memory pool**: Spark's text carries the JVM's `OutOfMemoryError` (heap, or direct buffer memory), Netty's
  `OutOfDirectMemoryError` (Arrow's buffers in the JVM, over `MaxDirectMemorySize`) and Arrow Java's
  `OutOfMemoryException` (direct memory), a task result the driver had no heap to fetch, results over
  `spark.driver.maxResultSize`, a Python `MemoryError` or a subclass (pyarrow's, numpy's: a worker over its share of
  `spark.executor.pyspark.memory`), a Python worker that died without a traceback (killed by its limit or by the
  kernel's OOM killer), or the driver's JVM gone from under py4j.
- **Out of memory** (the tuner's question): a process ran out of memory, named by its class (the JVM's, Python's) or
  by the text of a container killed over its memory limit.
- **Insert call failed** (the tuner's other question): the `yt` sink's note on an insert call that failed; any other
  failure (the source's, a transform's) is no evidence about the rows per insert call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from streaming_core.insert_failure import INSERT_CALL_FAILED

#: The memory pools a failure can blame (the OOM check's pools, `opsd.checks.oom.evaluate.POOLS`).
MemoryPool = Literal["jvm_heap", "direct", "python_worker", "driver_result"]

#: Exception classes that a restart replays unchanged: the connector's errors of configuration and data layout,
#: Spark's analysis errors, and Python's errors of code and values.
PERMANENT_CLASSES = frozenset({
    "NoSuchPathError", "NotRegisteredError", "SchemaError", "InvalidUriError", "TrimmedRowsError",
    "BeyondQueueEndError",
    "AnalysisException", "ParseException",
    "ValueError", "TypeError", "KeyError", "AttributeError", "NameError", "ImportError", "ModuleNotFoundError",
    "SyntaxError", "NotImplementedError",
})
#: What PySpark raises once the driver's JVM is gone: Py4J cannot reach it.
DRIVER_GONE_CLASSES = frozenset({"Py4JNetworkError", "ConnectionRefusedError"})
#: Texts of a JVM that Py4J lost: its process died (or never started).
JVM_LOST_SIGNS = ("Py4JNetworkError", "Answer from Java side is empty", "Error while receiving",
                  "Java gateway process exited")
#: Texts of a SparkContext stopped under the query.
CONTEXT_STOPPED_SIGNS = ("SparkContext was shut down", "Cannot call methods on a stopped SparkContext")

#: Exception classes that say a process ran out of memory.
MEMORY_CLASSES = frozenset({"OutOfMemoryError", "MemoryError", "SparkOutOfMemoryError", "OutOfDirectMemoryError"})
#: Texts that say the same where no class names it (a killed executor or container, a direct buffer).
MEMORY_TEXTS = ("java.lang.OutOfMemoryError", "exceeding memory limits", "OOMKilled", "Direct buffer memory",
                "Cannot allocate memory")

# Checked in order: the first that matches names the pool.
_POOL_CAUSES: tuple[tuple[MemoryPool, re.Pattern[str]], ...] = (
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
)

_LEADING_CLASS = re.compile(r"^\s*([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)(?::|\s*$)")
# A Python exception line inside a traceback starts at column 0: "ValueError: kaboom".
_PYTHON_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")
_PYTHON_WRAPPERS = {"PythonException", "StreamingQueryException"}
_TRACEBACK = "Traceback (most recent call last):"
# What follows a Python traceback in Spark's text: the JVM stack, the SQL state, the query description.
_END_OF_PYTHON = ("\tat ", " SQLSTATE:", "=== Streaming Query ===")
_MAX_MESSAGE = 500


@dataclass(frozen=True)
class PythonError:
    """The last Python exception of the last traceback in Spark's text: the product's own error (it names the
    option, path or row at fault). `exception_class` is the simple class name, `message` its first line."""

    exception_class: str
    message: str

    def __str__(self) -> str:
        return f"{self.exception_class}: {self.message}" if self.message else self.exception_class


@dataclass(frozen=True)
class Failure:
    """One failure of a pipeline's query: its class (the product's own inside Spark's wrappers), one line that says
    what failed, whether a restart replays it unchanged (`permanent`), and whether Spark's JVM is gone
    (`driver_gone`: no query of this process can start again, the daemon must exit and be restarted)."""

    exception_class: str
    message: str
    permanent: bool
    driver_gone: bool = False


def python_error(text: str) -> PythonError | None:
    """The last Python exception of the last traceback in `text`; None without a traceback."""
    if _TRACEBACK not in text:
        return None
    found = None
    for line in text.rsplit(_TRACEBACK, 1)[1].splitlines():
        if line.startswith(_END_OF_PYTHON):
            break
        match = _PYTHON_EXCEPTION_LINE.match(line)
        if match:
            found = PythonError(match.group(1).rsplit(".", 1)[-1], line[match.end():].strip()[:_MAX_MESSAGE])
    return found


def exception_class(text: str) -> str:
    """The most specific exception class named in Spark's failure text, for the bounded `exception` label.

    Spark reports ``org.apache.spark.api.python.PythonException: ... Traceback ... ValueError: x``
    for Python failures; the Python class (``ValueError``) says more than the wrapper, so it wins
    when a traceback is present. Otherwise the leading (Java or Python) class's simple name is used,
    and ``"Unknown"`` when the text names none.
    """
    match = _LEADING_CLASS.match(text)
    leading = match.group(1).rsplit(".", 1)[-1] if match else "Unknown"
    python = python_error(text) if leading in _PYTHON_WRAPPERS or leading == "Unknown" else None
    return python.exception_class if python is not None else leading


def failure_message(text: str) -> str:
    """One line that says what failed: the product's own `Class: message` from the Python traceback in Spark's
    text when there is one, else the text's first line."""
    python = python_error(text)
    if python is not None:
        return str(python)
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first[:_MAX_MESSAGE]


def failure_text(error: BaseException) -> str:
    """The error as Spark's failure texts read: `Class: message` (PySpark's exceptions carry the JVM's text)."""
    name = type(error).__name__
    text = str(error).strip()
    return text if text.startswith(name) else f"{name}: {text}" if text else name


def classify(error: BaseException | str) -> Failure:
    """The failure behind `error` (a Python exception, or Spark's failure text)."""
    text = error if isinstance(error, str) else failure_text(error)
    python = python_error(text)  # the product's own error inside any of Spark's wrappers decides
    cls = python.exception_class if python is not None else exception_class(text)
    gone = cls in DRIVER_GONE_CLASSES or _jvm_lost(text) or any(sign in text for sign in CONTEXT_STOPPED_SIGNS)
    return Failure(cls, failure_message(text), cls in PERMANENT_CLASSES, driver_gone=gone)


def memory_pool(text: str | None) -> MemoryPool | None:
    """The pool whose exhaustion the failure text shows; None for other failures. A driver JVM that vanished is
    counted against the heap."""
    if not text:
        return None
    for pool, pattern in _POOL_CAUSES:
        if pattern.search(text):
            return pool
    return "jvm_heap" if _jvm_lost(text) else None


def out_of_memory(text: str | None) -> bool:
    """Whether Spark's failure text says a process ran out of memory."""
    if not text:
        return False
    python = python_error(text)
    classes = {exception_class(text), python.exception_class if python else ""}
    return bool(classes & MEMORY_CLASSES) or any(marker in text for marker in MEMORY_TEXTS)


def insert_call_failed(text: str | None) -> bool:
    """Whether Spark's failure text is a failed insert call of the `yt` sink (noted by `streaming_core.insert_failure`),
    the only failure that tells the tuner something about `dynBatchSize`."""
    return bool(text) and INSERT_CALL_FAILED in text


def _jvm_lost(text: str) -> bool:
    return any(sign in text for sign in JVM_LOST_SIGNS)
