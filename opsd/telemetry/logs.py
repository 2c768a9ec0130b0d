"""structlog configuration, done once at opsd's entry point (``opsd run``, ``opsd demo``), and Spark's JVM logs.

JSON lines when stderr is not a terminal (Kubernetes, files), a readable console renderer on one.
Standard-library loggers (APScheduler, py4j) go through the same processors, so every line has
the same shape and passes the same secret redaction; their chatter (APScheduler's "Running job" at every
check run, py4j's callbacks) is held back to warnings by default (`THIRD_PARTY_LEVELS`). Spark's own (log4j2)
lines are written by the JVM; `spark_java_options` gives them the same keys and format (`log4j2.properties`),
and `children_write_to` sends all a child process prints (the JVM's start-up notes included) to a file.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any, TextIO

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

REDACTED = "***"
_SECRET_KEY = re.compile(r"token|password|passwd|secret|authorization|api[_-]?key|credential", re.IGNORECASE)
# An HTTP authorization value inside a message: "Authorization: OAuth AQAD-...", "Bearer eyJ...".
_AUTH_VALUE = re.compile(r"\b(OAuth|Bearer|Basic)\s+[^\s'\",]+", re.IGNORECASE)
_HANDLER_NAME = "opsd"
# Tokens shorter than this are too likely to occur in ordinary text to be replaced safely.
_MIN_SECRET_LENGTH = 8
#: Levels of third-party loggers unless the caller says otherwise: their INFO lines are routine chatter.
THIRD_PARTY_LEVELS = {"apscheduler": "WARNING", "py4j": "WARNING"}
#: The log4j2 configuration that Spark's JVM gets in sessions opsd builds.
LOG4J2_CONFIG = Path(__file__).with_name("log4j2.properties")


class SecretRedactor:
    """A structlog processor that masks secrets in any event field, nested dicts and lists included.

    Masks the value of every key that names a secret (token, password, secret, authorization, ...),
    any occurrence of the known secret values (``YT_TOKEN``), and ``OAuth``/``Bearer`` credentials.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets = tuple(s for s in secrets if s and len(s) >= _MIN_SECRET_LENGTH)

    @classmethod
    def from_environment(cls) -> SecretRedactor:
        return cls([os.environ.get("YT_TOKEN", "")])

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        return self._mapping(event_dict)  # type: ignore[return-value]

    def _mapping(self, mapping: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        for key, value in mapping.items():
            mapping[key] = REDACTED if _SECRET_KEY.search(str(key)) and value else self._value(value)
        return mapping

    def _value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, MutableMapping):
            return self._mapping(dict(value))
        if isinstance(value, list | tuple):
            return type(value)(self._value(item) for item in value)
        return value

    def _text(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return _AUTH_VALUE.sub(lambda m: f"{m.group(1)} {REDACTED}", text)


def configure_logging(
    level: str | int = "INFO", stream: TextIO | None = None, json_lines: bool | None = None,
    levels: Mapping[str, str | int] | None = None,
) -> None:
    """Configure structlog and the standard-library root logger.

    ``json_lines`` defaults to "stream is not a TTY"; ``levels`` sets named loggers' levels over
    `THIRD_PARTY_LEVELS`. Calling it again replaces the previous configuration (its handler is found
    by name), so tests and re-entry stay clean.
    """
    stream = stream or sys.stderr
    if json_lines is None:
        json_lines = renders_json(stream)
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Processor = (
        structlog.processors.JSONRenderer() if json_lines else structlog.dev.ConsoleRenderer(colors=True)
    )
    # Redaction runs last before rendering, so it also sees formatted tracebacks and stdlib records.
    final: list[Processor] = [structlog.processors.format_exc_info] if json_lines else []
    final.append(SecretRedactor.from_environment())
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *final, renderer],
        )
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(_level(level))
    for name, named_level in {**THIRD_PARTY_LEVELS, **(levels or {})}.items():
        logging.getLogger(name).setLevel(_level(named_level))


def renders_json(stream: TextIO) -> bool:
    """The default format: JSON lines unless a person reads `stream` on a terminal."""
    return not stream.isatty()


def spark_java_options(level: str = "WARN", json_lines: bool = True) -> str:
    """JVM options (`spark.driver.extraJavaOptions`) that make Spark log through `LOG4J2_CONFIG`: at `level`,
    as JSON lines or console lines on stderr."""
    return (f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()} -Dopsd.spark.logLevel={level.lower()} "
            f"-Dopsd.spark.logFormat={'json' if json_lines else 'console'}")


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
