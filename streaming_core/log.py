"""The connector's loggers: structlog, imported when a module first logs rather than when it is imported.

`import structlog` costs ~60 ms here (it loads `structlog.dev`, which loads `rich`, and asyncio). Spark starts a
fresh Python process for the source of every streaming query (the streaming source runner), which imports the
source's modules and, most of the time, never logs: deferring the import keeps that off every query start.
Events are logged as everywhere else, an event name and key-values (`log.warning("tuning_ignored", ...)`), and
structlog's configuration (opsd's, or `structlog.testing.capture_logs`) applies at each call.
"""

from __future__ import annotations

from typing import Any


class _Logger:
    """Forwards every logging method to `structlog.get_logger(name)`, imported on the first call."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: Any = None

    def __getattr__(self, method: str) -> Any:
        if self._logger is None:
            import structlog

            self._logger = structlog.get_logger(self._name)
        return getattr(self._logger, method)


def get_logger(name: str) -> Any:
    return _Logger(name)
