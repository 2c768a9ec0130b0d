"""Failures of a pipeline: what failed (one line) and whether a restart can ever help (permanent or transient).

A permanent failure is one that a restart replays unchanged: a configuration or code error (a transform module
that does not exist, an unknown source option, a sink table that does not exist or does not fit, SQL that does not
analyse) or a checkpoint that can no longer be replayed. Restarting those for ever hides the cause behind a crash
loop, so the supervisor stops the pipeline and says why. Everything else (a lost executor, an unreachable proxy, a
conflict, memory) may pass, and is retried with backoff. Pure: a function of the error's text.
"""

from __future__ import annotations

from dataclasses import dataclass

from opsd.observe.events import exception_class, failure_message, python_failure

#: Exception classes that a restart replays unchanged: the connector's errors of configuration and data layout,
#: Spark's analysis errors, and Python's errors of code and values.
PERMANENT_CLASSES = frozenset({
    "NoSuchPathError", "NotRegisteredError", "SchemaError", "InvalidUriError", "TrimmedRowsError",
    "BeyondQueueEndError",
    "AnalysisException", "ParseException",
    "ValueError", "TypeError", "KeyError", "AttributeError", "NameError", "ImportError", "ModuleNotFoundError",
    "SyntaxError", "NotImplementedError",
})


#: What PySpark raises once the driver's JVM is gone: Py4J cannot reach it, or the context is stopped.
DRIVER_GONE_CLASSES = frozenset({"Py4JNetworkError", "ConnectionRefusedError"})
DRIVER_GONE_SIGNS = ("SparkContext was shut down", "Cannot call methods on a stopped SparkContext",
                     "Answer from Java side is empty", "Error while receiving")


@dataclass(frozen=True)
class Failure:
    """One failure of a pipeline's query. `driver_gone`: Spark's JVM is gone (in local mode a driver that died of
    memory takes it along), so no query of this process can start again: the daemon must exit and be restarted."""

    exception_class: str
    message: str
    permanent: bool
    driver_gone: bool = False


def classify(error: BaseException | str) -> Failure:
    """The failure behind `error` (a Python exception, or Spark's failure text)."""
    text = error if isinstance(error, str) else failure_text(error)
    python = python_failure(text)  # the product's own error inside any of Spark's wrappers decides
    cls = python[0] if python is not None else exception_class(text)
    gone = cls in DRIVER_GONE_CLASSES or any(sign in text for sign in DRIVER_GONE_SIGNS)
    return Failure(cls, failure_message(text), cls in PERMANENT_CLASSES, driver_gone=gone)


def failure_text(error: BaseException) -> str:
    """The error as Spark's failure texts read: `Class: message` (PySpark's exceptions carry the JVM's text)."""
    name = type(error).__name__
    text = str(error).strip()
    return text if text.startswith(name) else f"{name}: {text}" if text else name
