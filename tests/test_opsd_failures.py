"""Failures of a pipeline: the product's own message found in Spark's text, and permanent vs transient."""

from __future__ import annotations

import threading

import pytest

from opsd.observe.events import failure_message
from opsd.runtime.failures import classify

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
