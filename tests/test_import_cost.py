"""What Spark's streaming source runner pays at every query start: it is a fresh Python process that imports the
data source's module (`streaming_core.datasource`) and calls the reader. Heavy modules that a reader never uses
stay out of it: the sink's modules, structlog (with rich and asyncio, ~60 ms; loggers import it on first use),
and pandas (which pyarrow imports when it first converts a Python value)."""

from __future__ import annotations

import subprocess
import sys

from structlog.testing import capture_logs

from streaming_core.log import get_logger


def test_the_data_source_module_imports_no_writer_module_no_structlog_and_no_pandas():
    code = ("import sys, streaming_core.datasource\n"
            "print(sorted(m for m in ('streaming_core.sink', 'streaming_core.save_modes', 'structlog', 'rich', "
            "'pandas') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout

    assert out.strip() == "[]"


def test_a_logger_imports_structlog_at_its_first_event_and_logs_through_its_configuration():
    log = get_logger("streaming_core.example")

    with capture_logs() as logs:
        log.warning("tuning_ignored", path="//tuning", reason="not a number")

    assert logs == [{"event": "tuning_ignored", "path": "//tuning", "reason": "not a number", "log_level": "warning"}]
