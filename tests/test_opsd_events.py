"""Query lifecycle events: the failure's class comes from `opsd.observe.failures` (tests/test_failures.py)."""

from __future__ import annotations

from opsd.observe.events import QueryTerminated


def test_clean_termination_has_no_exception_class() -> None:
    assert QueryTerminated(id="i", run_id="r").exception_class is None


def test_a_failed_termination_names_the_most_specific_class() -> None:
    failed = QueryTerminated(id="i", run_id="r", exception="java.lang.OutOfMemoryError: Java heap space\n\tat x")
    assert failed.exception_class == "OutOfMemoryError"
