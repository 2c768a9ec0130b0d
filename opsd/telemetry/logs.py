"""structlog configuration, done once at opsd's entry point (``opsd run``, ``opsd demo``; `opsd.attach` in a
script: `configure_library_logging`), and Spark's JVM logs.

JSON lines when stderr is not a terminal (Kubernetes, files), a readable console renderer on one (tracebacks as
plain text without local variables, control characters escaped). Standard-library loggers (APScheduler, py4j,
ytsaurus-client's `Yt`, whose own handler is taken away) go through the same processors, so every line has
the same shape and passes the same secret redaction (`opsd.telemetry.redaction`); their chatter (APScheduler's
"Running job" at every check run, py4j's callbacks) is held back to warnings by default (`THIRD_PARTY_LEVELS`).
Spark's own (log4j2) lines are written by the JVM; `spark_java_options` gives them the same keys and format
(`log4j2.properties`) and holds back the seven lines Spark writes about one failed task (opsd's `query_failed` says
it in one, the whole trace at DEBUG on `TRACES_LOGGER`), and `children_write_to` sends all a child process prints
(the JVM's start-up notes included) to a file.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from opsd.telemetry.redaction import Redactor
from opsd.telemetry.terminal import printable
from streaming_core.log import configured_by_default, redact_foreign_loggers

log = structlog.get_logger(__name__)

_HANDLER_NAME = "opsd"
#: Levels of third-party loggers unless the caller says otherwise: their INFO lines are routine chatter.
THIRD_PARTY_LEVELS = {"apscheduler": "WARNING", "py4j": "WARNING"}
#: Loggers that install their own handler and stop propagating (ytsaurus-client's `Yt` writes plain lines to
#: stderr): `configure_logging` takes their handlers away so that they log through opsd's, in its format.
FOREIGN_LOGGERS = {"Yt": "yt.logger"}
#: The log4j2 configuration that Spark's JVM gets in sessions opsd builds.
LOG4J2_CONFIG = Path(__file__).with_name("log4j2.properties")
#: Spark levels at which the JVM's own lines about a failed task (the executor's, the scheduler's, the query's, each
#: with the whole trace) are shown; above them opsd's one `query_failed` line speaks for them (`log4j2.properties`).
SPARK_FAILURE_LINES_LEVELS = frozenset({"INFO", "DEBUG", "TRACE"})
#: The logger of whole failure texts (Spark's Java stack and the Python traceback): at DEBUG, so that INFO has one
#: line per failure; a log file that must keep them (the demo's) sets this logger's level to DEBUG.
TRACES_LOGGER = "opsd.traces"


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is when a record comes (pytest's capture, a redirected stream), not to the one
    there was when logging was configured."""

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        """`sys.stderr` is always the stream."""


def escape_controls(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """A structlog processor for console lines: control characters in text values are written as escapes, so that
    text from data (a queue path, an exception message) cannot move the cursor or set the terminal's title."""
    return {key: printable(value) if isinstance(value, str) else value for key, value in event_dict.items()}


def configure_logging(
    level: str | int = "INFO", stream: TextIO | None = None, json_lines: bool | None = None,
    levels: Mapping[str, str | int] | None = None,
) -> None:
    """Configure structlog and the standard-library root logger.

    ``json_lines`` defaults to "stream is not a TTY"; ``levels`` sets named loggers' levels over
    `THIRD_PARTY_LEVELS`. Calling it again replaces the previous configuration (its handler is found
    by name), so tests and re-entry stay clean.
    """
    if json_lines is None:
        json_lines = renders_json(stream or sys.stderr)
    shared = _SHARED
    final = _final(json_lines, colors=True)
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream) if stream is not None else _StderrHandler()
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *final],
        )
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(_level(level))
    for name, module in FOREIGN_LOGGERS.items():
        importlib.import_module(module)  # it adds its handler on import: import it first, then take the handler
        foreign = logging.getLogger(name)
        for own in list(foreign.handlers):
            foreign.removeHandler(own)
        foreign.propagate = True
    for name, named_level in {**THIRD_PARTY_LEVELS, **(levels or {})}.items():
        logging.getLogger(name).setLevel(_level(named_level))


_SHARED: list[Processor] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]


def _final(json_lines: bool, colors: bool) -> list[Processor]:
    """The processors after the shared ones, the renderer last. Tracebacks are formatted as plain text (never with
    their frames' local variables, which hold tokens) before redaction, which runs last before rendering, so that it
    sees them and stdlib records alike."""
    final: list[Processor] = [structlog.processors.format_exc_info, Redactor.from_environment()]
    if json_lines:
        return [*final, structlog.processors.JSONRenderer()]
    return [*final, escape_controls,
            structlog.dev.ConsoleRenderer(colors=colors, exception_formatter=structlog.dev.plain_traceback)]


class _LibraryBoundLogger(structlog.stdlib.BoundLogger):
    """`exception()` logs at error with the traceback formatted (and redacted) into the line: the standard library's
    `Logger.exception` would append the raw traceback to it."""

    def exception(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        kw.setdefault("exc_info", True)
        return self._proxy_to_logger("error", event, *args, **kw)


def configure_library_logging(json_lines: bool | None = None) -> bool:
    """structlog for opsd used as a library (`opsd.attach` in the user's script): the same processors as
    `configure_logging` (plain tracebacks without locals, the redaction last), each event rendered into one line
    handed to the standard library's logger of its name, so that the script's own logging setup (handlers, levels)
    decides where it goes. The standard library's loggers are left as they are, but py4j's and ytsaurus-client's
    records leave redacted (`streaming_core.log.redact_foreign_loggers`). A structlog configuration the
    script chose is kept (False returned); the connector's default (`streaming_core.log`) or none is replaced.
    ``json_lines`` defaults to "stderr is not a TTY"."""
    redact_foreign_loggers()
    if not configured_by_default():
        log.info("opsd_logging_left_to_the_script", reason="structlog is configured")
        return False
    structlog.configure(
        processors=[structlog.stdlib.filter_by_level, *_SHARED,
                    *_final(renders_json(sys.stderr) if json_lines is None else json_lines, colors=False)],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=_LibraryBoundLogger,
        cache_logger_on_first_use=False,
    )
    return True


def renders_json(stream: TextIO) -> bool:
    """The default format: JSON lines unless a person reads `stream` on a terminal."""
    return not stream.isatty()


def spark_java_options(level: str = "WARN", json_lines: bool = True) -> str:
    """JVM options (`spark.driver.extraJavaOptions`) that make Spark log through `LOG4J2_CONFIG`: at `level`,
    as JSON lines or console lines on stderr, its lines about a failed task only at `SPARK_FAILURE_LINES_LEVELS`."""
    failure_lines = "show" if level.upper() in SPARK_FAILURE_LINES_LEVELS else "hide"
    return (f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()} -Dopsd.spark.logLevel={level.lower()} "
            f"-Dopsd.spark.logFormat={'json' if json_lines else 'console'} -Dopsd.spark.failureLines={failure_lines}")


@contextlib.contextmanager
def children_write_to(path: Path) -> Iterator[None]:
    """Point this process's stdout and stderr file descriptors at `path` (appended) while inside: a child process
    started meanwhile (Spark's JVM, and the Python workers it starts) keeps writing there for good. Python's own
    `sys.stdout` / `sys.stderr` write to the file too until the block ends."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    with open(path, "ab") as target:
        for fd in saved:
            os.dup2(target.fileno(), fd)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)


def _level(level: str | int) -> int | str:
    return level if isinstance(level, int) else level.upper()
