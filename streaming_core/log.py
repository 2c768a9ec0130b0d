"""The connector's loggers: structlog, imported when a module first logs rather than when it is imported.

`import structlog` costs ~60 ms here (it loads `structlog.dev`, which loads `rich`, and asyncio). Spark starts a
fresh Python process for the source of every streaming query (the streaming source runner), which imports the
source's modules and, most of the time, never logs: deferring the import keeps that off every query start.
Events are logged as everywhere else, an event name and key-values (`log.warning("tuning_ignored", ...)`), and
structlog's configuration (opsd's, or `structlog.testing.capture_logs`) applies at each call.

Until someone configures structlog (opsd, or the user's script), the first event configures `DEFAULT_PROCESSORS`:
structlog's own defaults render a traceback with every frame's local variables (rich's, when installed), and those
hold tokens. The connector's default renders tracebacks as plain text and passes every line through the redaction
(`streaming_core.redaction`, last before rendering, as opsd's logging does), so that a script using the connector
alone never logs a token either. `configured_by_default` tells opsd's library use (`opsd.attach`) that it may
replace them.

The libraries under the connector log through the standard library into the script's own handlers: py4j logs the
traceback of a failing `foreachBatch` function at ERROR (its text quotes whatever the error quoted), ytsaurus-client
its retries. `redact_foreign_loggers` (called by `streaming_core.register` and `opsd.attach`) puts a
`RedactingFilter` on them: each of their records leaves with its message and traceback redacted, the traceback as
plain text without locals, whatever handler writes it.
"""

from __future__ import annotations

import logging
import traceback
from typing import Any

#: The connector's processors while nobody has configured structlog: tracebacks as plain text, never with locals, and
#: every line redacted.
DEFAULT_PROCESSORS: list[Any] = []


#: Loggers of the libraries under the connector whose records may quote a secret: py4j's (a failing `foreachBatch`
#: function's traceback, at ERROR) and ytsaurus-client's `Yt`.
FOREIGN_LOGGERS = ("py4j.clientserver", "py4j.java_gateway", "Yt")


class RedactingFilter(logging.Filter):
    """Redacts a standard-library record in place before any handler sees it: the message with its arguments merged,
    and the exception as a plain traceback (the handlers then print that text, never the exception itself)."""

    def __init__(self) -> None:
        super().__init__()
        from streaming_core.redaction import Redactor

        self._redactor = Redactor.from_environment()

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = self._redactor.text(record.getMessage()), ()
        if record.exc_info:
            text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
            record.exc_text, record.exc_info = self._redactor.text(text), None
        elif record.exc_text:
            record.exc_text = self._redactor.text(record.exc_text)
        return True


def redact_foreign_loggers() -> None:
    """Put one `RedactingFilter` on each of `FOREIGN_LOGGERS` that has none yet (one redactor reads the token sources
    for all of them)."""
    bare = [logger for logger in map(logging.getLogger, FOREIGN_LOGGERS)
            if not any(isinstance(f, RedactingFilter) for f in logger.filters)]
    if bare:
        shared = RedactingFilter()
        for logger in bare:
            logger.addFilter(shared)


def configured_by_default() -> bool:
    """Whether structlog's configuration is the connector's default (or none yet), not one its user chose."""
    import structlog

    return not structlog.is_configured() or structlog.get_config()["processors"] is DEFAULT_PROCESSORS


def _configure_default(structlog: Any) -> None:
    if structlog.is_configured():
        return
    from streaming_core.redaction import Redactor

    DEFAULT_PROCESSORS[:] = [
        structlog.contextvars.merge_contextvars, structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True), structlog.processors.format_exc_info,
        Redactor.from_environment(),
        structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback),
    ]
    structlog.configure(processors=DEFAULT_PROCESSORS)


class _Logger:
    """Forwards every logging method to `structlog.get_logger(name)`, imported on the first call."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: Any = None

    def __getattr__(self, method: str) -> Any:
        if self._logger is None:
            import structlog

            _configure_default(structlog)
            self._logger = structlog.get_logger(self._name)
        return getattr(self._logger, method)


def get_logger(name: str) -> Any:
    return _Logger(name)
