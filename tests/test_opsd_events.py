"""Exception classes for the bounded `exception` label, parsed from Spark's failure text."""

from __future__ import annotations

import pytest

from opsd.observe.events import QueryTerminated, exception_class

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


def test_clean_termination_has_no_exception_class() -> None:
    assert QueryTerminated(id="i", run_id="r").exception_class is None
