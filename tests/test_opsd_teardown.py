"""opsd's teardown steps: each failure is logged and the next step still runs; a step that fails because Spark's JVM
has already exited (a SIGTERM to opsd's whole process group reaches the JVM too) is one warning line, no trace."""

from __future__ import annotations

from py4j.protocol import Py4JNetworkError
from structlog.testing import capture_logs

from opsd.runtime.lifecycle import _logged


def _raise(error: Exception) -> None:
    raise error


def test_a_step_that_finds_the_jvm_gone_is_one_warning_without_a_trace() -> None:
    with capture_logs() as logs:
        _logged("spark_stop", lambda: _raise(Py4JNetworkError("Answer from Java side is empty")))
    assert [(e["event"], e["log_level"], e.get("reason")) for e in logs] == [
        ("teardown_step_skipped", "warning", "spark_jvm_exited")]
    assert "exc_info" not in logs[0]


def test_any_other_failure_is_logged_with_its_trace() -> None:
    with capture_logs() as logs:
        _logged("monitor_detach", lambda: _raise(RuntimeError("listener still registered")))
    assert [(e["event"], e["log_level"], e.get("step")) for e in logs] == [
        ("teardown_step_failed", "error", "monitor_detach")]
    assert logs[0]["exc_info"] is True
