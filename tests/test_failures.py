"""Spark's failure text read by the one failures module (`opsd.observe.failures`): the exception class of the metric
label, the product's own message found in Spark's text, permanent vs transient, a driver that is gone, the memory pool
a failure blames and whether memory ran out."""

from __future__ import annotations

import threading

import pytest

from opsd.observe.failures import (
    Failure,
    PythonError,
    classify,
    exception_class,
    failure_message,
    memory_pool,
    out_of_memory,
    python_error,
)

# Captured from a real run (PySpark 4.2): `.load()` with an unknown option; the message is after the traceback.
UNKNOWN_OPTION = (
    "[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: Traceback (most recent call last):\n"
    '  File "/app/streaming_core/datasource.py", line 42, in schema\n'
    "    options = self._source_options(streaming=streaming)\n"
    "              ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    '  File "/app/streaming_core/options.py", line 97, in _check_unknown\n'
    '    raise ValueError(f"unknown {what} option(s) {unknown}; known options: {sorted(known)}")\n'
    "ValueError: unknown source option(s) ['bogus']; known options: ['cluster', 'consumer_path']\n"
    " SQLSTATE: 38000"
)
# Captured from a real run: a yt sink whose table does not exist, as `awaitTermination` raises it.
MISSING_SINK = (
    "[STREAM_FAILED] Query [id = fd3f, runId = d663] terminated with exception: [PYTHON_DATA_SOURCE_ERROR] Failed "
    "to initialize Python data source writer: Traceback (most recent call last):\n"
    '  File "/app/streaming_core/cluster/embedded/nodes.py", line 45, in node\n'
    '    raise NoSuchPathError(f"{path}: no such node")\n'
    "streaming_core.cluster.errors.NoSuchPathError: //nope: no such node\n"
    " SQLSTATE: 38000 SQLSTATE: XXKST\n"
    "=== Streaming Query ===\n"
    "Identifier: [id = fd3f, runId = d663]\n"
)


class FakeAnalysisException(Exception):
    """Stands for PySpark's AnalysisException: what matters is the class name and the text."""


FakeAnalysisException.__name__ = "AnalysisException"


def test_the_products_message_is_found_behind_sparks_first_line() -> None:
    assert failure_message(UNKNOWN_OPTION) == (
        "ValueError: unknown source option(s) ['bogus']; known options: ['cluster', 'consumer_path']")
    assert failure_message(MISSING_SINK) == "NoSuchPathError: //nope: no such node"


def test_without_a_python_traceback_the_first_line_is_the_message() -> None:
    assert failure_message("java.lang.OutOfMemoryError: Java heap space\n\tat x") == (
        "java.lang.OutOfMemoryError: Java heap space")


@pytest.mark.parametrize(("error", "permanent"), [
    (FakeAnalysisException(UNKNOWN_OPTION), True),
    (MISSING_SINK, True),
    (ValueError("cannot load callable 'jobs.nope:f': No module named 'jobs'"), True),
    (FakeAnalysisException("[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column `x` cannot be resolved"), True),
    ("[STREAM_FAILED] Query terminated with exception: Job aborted: java.lang.OutOfMemoryError", False),
    (ConnectionResetError("peer reset"), False),
    ("streaming_core.cluster.errors.UnreachableClusterError: proxy cannot be reached", False),
])
def test_errors_a_restart_replays_unchanged_are_permanent(error: object, permanent: bool) -> None:
    assert classify(error).permanent is permanent  # type: ignore[arg-type]


def test_a_failure_names_its_class_and_message() -> None:
    failure = classify(FakeAnalysisException(UNKNOWN_OPTION))
    assert (failure.exception_class, failure.message.split(":")[0]) == ("ValueError", "ValueError")


@pytest.mark.parametrize("error", [
    ConnectionRefusedError(111, "Connection refused"),
    "py4j.protocol.Py4JNetworkError: Answer from Java side is empty",
    "java.lang.IllegalStateException: SparkContext was shut down",
])
def test_a_driver_that_is_gone_is_told_apart_from_a_failure_that_can_pass(error: object) -> None:
    assert classify(error).driver_gone  # type: ignore[arg-type]


# Captured from a real local run: a Python UDF raising ValueError inside a streaming query.
REAL_PYTHON_FAILURE = (
    "org.apache.spark.api.python.PythonException: [PYTHON_EXCEPTION] An exception was thrown from the "
    "Python worker: Traceback (most recent call last):\n"
    '  File "/tmp/cap/cap.py", line 24, in boom\n'
    '    raise ValueError("kaboom")\n'
    "ValueError: kaboom\n"
    " SQLSTATE: 38000\n"
    "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:665)\n"
    "\tat org.apache.spark.sql.execution.python.PythonArrowOutput$$anon$1.read(PythonArrowOutput.scala:142)\n"
)


def test_python_failure_is_labelled_with_the_python_class() -> None:
    assert exception_class(REAL_PYTHON_FAILURE) == "ValueError"


def test_chained_python_failure_is_labelled_with_the_last_exception() -> None:
    text = (
        "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
        "KeyError: 'x'\n\nDuring handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\nmodule.CustomError: boom\n\tat org.Foo.bar(Foo.scala:1)\n"
    )
    assert exception_class(text) == "CustomError"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("java.lang.OutOfMemoryError: Java heap space\n\tat x", "OutOfMemoryError"),
        ("org.apache.spark.sql.streaming.StreamingQueryException: [STREAM_FAILED] boom", "StreamingQueryException"),
        ("java.lang.IllegalStateException", "IllegalStateException"),
        ("something went wrong", "Unknown"),
    ],
)
def test_jvm_failures_are_labelled_with_the_simple_class_name(text: str, expected: str) -> None:
    assert exception_class(text) == expected


def test_the_products_own_error_is_a_typed_result() -> None:
    assert python_error(UNKNOWN_OPTION) == PythonError(
        "ValueError", "unknown source option(s) ['bogus']; known options: ['cluster', 'consumer_path']")
    assert python_error("Traceback (most recent call last):\n  File \"x\"\nMemoryError\n") == PythonError(
        "MemoryError", "")
    assert python_error("java.lang.OutOfMemoryError: Java heap space") is None


def test_a_classified_failure_is_frozen() -> None:
    failure = classify(MISSING_SINK)
    assert failure == Failure("NoSuchPathError", "NoSuchPathError: //nope: no such node", permanent=True)
    with pytest.raises(AttributeError):
        failure.permanent = False  # type: ignore[misc]


@pytest.mark.parametrize(("text", "pool"), [
    ("SparkException: Job aborted ... java.lang.OutOfMemoryError: Java heap space\n\tat x", "jvm_heap"),
    ("java.lang.OutOfMemoryError: GC overhead limit exceeded", "jvm_heap"),
    ("Lost task 0.0 in stage 0.0 (TID 0) (host executor driver): TaskResultLost (result lost from block manager)",
     "jvm_heap"),
    ("java.lang.OutOfMemoryError: Direct buffer memory", "direct"),
    ("org.apache.arrow.memory.OutOfMemoryException: Failure allocating buffer.\nCaused by: io.netty.util.internal."
     "OutOfDirectMemoryError: failed to allocate 100663256 byte(s) of direct memory (used: 109543384, max: 134217728)",
     "direct"),
    ("org.apache.spark.SparkException: Job aborted due to stage failure: Total size of serialized results of 3 tasks "
     "(1100.2 MiB) is bigger than spark.driver.maxResultSize (1024.0 MiB)", "driver_result"),
    ("org.apache.arrow.memory.OutOfMemoryException: Failure allocating buffer", "direct"),
    ("PythonException: An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
     "  File \"x.py\", line 1, in f\nMemoryError\n", "python_worker"),
    ("org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)", "python_worker"),
    ("PythonException: Traceback ...\nnumpy.core._exceptions._ArrayMemoryError: Unable to allocate 30.5 MiB for an "
     "array with shape (2, 2000000) and data type object\n", "python_worker"),
    ("Traceback ...\npyarrow.lib.ArrowMemoryError: malloc of size 67108864 failed\n", "python_worker"),
    ("py4j.protocol.Py4JNetworkError: Answer from Java side is empty", "jvm_heap"),
    ("PythonException: ... ValueError: kaboom", None),
    (None, None),
])
def test_a_failure_is_blamed_on_the_pool_whose_memory_ran_out(text: str | None, pool: str | None) -> None:
    assert memory_pool(text) == pool


@pytest.mark.parametrize("text", [
    "py4j.protocol.Py4JNetworkError: Error while receiving",
    "[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number.",
])
def test_a_lost_driver_jvm_is_blamed_on_the_heap_and_is_a_driver_gone(text: str) -> None:
    """One recognition of a JVM that py4j lost serves both readers: the OOM check and the supervisor."""
    assert memory_pool(text) == "jvm_heap"
    assert classify(text).driver_gone


def test_a_stopped_context_is_a_driver_gone_but_blames_no_pool() -> None:
    text = "java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext."
    assert classify(text).driver_gone and memory_pool(text) is None


def test_the_pools_are_the_oom_checks_pools() -> None:
    from typing import get_args

    from opsd.checks.oom.evaluate import POOLS
    from opsd.observe.failures import MemoryPool

    assert set(get_args(MemoryPool)) == set(POOLS)


@pytest.mark.parametrize("text", [
    "org.apache.spark.SparkException: Job aborted due to stage failure: java.lang.OutOfMemoryError: Java heap space",
    "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n  File \"x\"\nMemoryError\n",
    "ExecutorLostFailure: Container killed by YARN for exceeding memory limits",
])
def test_memory_failures_are_told_from_their_texts(text: str) -> None:
    assert out_of_memory(text)


def test_other_failures_are_not_memory_failures() -> None:
    assert not out_of_memory("java.lang.IllegalStateException: boom")
    assert not out_of_memory(None)


def test_a_pipeline_whose_driver_is_gone_stops_at_once_instead_of_restarting() -> None:
    """In local mode a driver that dies of memory takes the JVM along: restarting against it loops for ever."""
    from prometheus_client import CollectorRegistry

    from opsd.config.models import PipelineConfig
    from opsd.observe.recorder import Recorder
    from opsd.observe.status import StatusStore
    from opsd.runtime.runner import Runner, Supervisor
    from opsd.telemetry.metrics import Metrics

    starts = []

    def start(spark, pipeline):
        starts.append(1)
        raise ConnectionRefusedError(111, "Connection refused")

    pipeline = PipelineConfig.model_validate({"name": "p", "source": {"format": "rate"},
                                              "sink": {"format": "memory"}})
    runner = Runner.__new__(Runner)
    runner.supervisors = [Supervisor(None, pipeline, Recorder(Metrics(CollectorRegistry()), StatusStore()),
                                     start=start)]
    runner.start()
    runner.wait(threading.Event(), poll_seconds=0.05)

    assert starts == [1] and runner.driver_gone()
