"""Secret redaction: what every text leaving the process passes through before it is written anywhere, whether
the connector runs alone (a PySpark script with `format("yt")`) or inside opsd.

`redact(value)` is the one function, and `Redactor` the one masking: the connector's own log lines
(`streaming_core.log` runs it as the last processor while nobody else configured structlog); in opsd, log lines of
every format (`opsd.telemetry.logs` runs it as the last processor before rendering, over formatted tracebacks too),
`/status`, `/readyz` and `/metrics` (`opsd.telemetry.http`), the CLI's tables and error lines
(`opsd.telemetry.terminal`), `opsd doctor` and config errors (`opsd.config.load`). It masks

- the value of every key that names a secret (`SECRET_KEY`: token, password, secret, authorization, ...), at any
  depth of dicts and lists;
- every occurrence of a secret this process knows, from every place `ytsaurus-client` reads a token from:
  `$YT_TOKEN`; the files `$YT_TOKEN_PATH` and `~/.yt/token`; a `token` and the file of a `token_path` in
  `$YT_CONFIG_PATCHES` and in the config files (`$YT_CONFIG_PATH`, `~/.yt/config`, and `/etc/ytclient.conf`, the
  global one the client reads when there is no user config: `yt/wrapper/default_config.py`, `_ConfigFSLoader`). A
  redactor made by `Redactor.from_environment` reads them again every `REFRESH_SECONDS`, so a rotated token file is
  masked too;
- every piece of such a secret at least `MIN_SECRET_LENGTH` long (a parser's error quotes a window of its input);
- `OAuth` / `Bearer` / `Basic` credentials in free text (an `Authorization` header echoed in an error).

Secrets shorter than `MIN_SECRET_LENGTH` are left alone: they are too likely to occur in ordinary text.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # structlog is imported where a line is first logged (`streaming_core.log`), never here
    from structlog.typing import EventDict, WrappedLogger

REDACTED = "***"
#: A key (a log field, a config key, a JSON member) whose value is a secret.
SECRET_KEY = re.compile(r"token|password|passwd|secret|authorization|api[_-]?key|credential", re.IGNORECASE)
# An HTTP authorization value inside a message: "Authorization: OAuth AQAD-...", "Bearer eyJ...".
_AUTH_VALUE = re.compile(r"\b(OAuth|Bearer|Basic)\s+[^\s'\",]+", re.IGNORECASE)
# Looked for before the expression runs: a substring test is ~50 times faster on a large text (a scrape's body).
_AUTH_SCHEMES = ("oauth", "bearer", "basic")
MIN_SECRET_LENGTH = 8
# Every piece of MIN_SECRET_LENGTH characters holds a whole aligned block of this many (`_Fragments`).
_BLOCK = MIN_SECRET_LENGTH // 2
#: Where `ytsaurus-client` finds a token besides `$YT_TOKEN`: the file `$YT_TOKEN_PATH` names, else this one.
TOKEN_PATH_ENV = "YT_TOKEN_PATH"
DEFAULT_TOKEN_FILE = Path("~/.yt/token")
#: The client's configuration: YSON patches in this variable, and the config file (`$YT_CONFIG_PATH` or this one).
CONFIG_PATCHES_ENV = "YT_CONFIG_PATCHES"
CONFIG_PATH_ENV = "YT_CONFIG_PATH"
DEFAULT_CONFIG_FILE = Path("~/.yt/config")
GLOBAL_CONFIG_FILE = Path("/etc/ytclient.conf")
#: How often a redactor made by `from_environment` reads the token sources again (a rotation is masked after it).
REFRESH_SECONDS = 1.0
# A token file is a line of text; anything bigger is not one. A config file is small too.
_MAX_TOKEN_FILE_BYTES = 4096
_MAX_CONFIG_FILE_BYTES = 1 << 20
# `token="..."` (YSON) or `"token": "..."` (JSON), and the same of `token_path`, at any depth of the configuration.
_CONFIG_VALUE = re.compile(r'"?\b(token|token_path)"?\s*[=:]\s*"((?:[^"\\]|\\.)*)"')


def known_secrets() -> list[str]:
    """The secrets this process may hold: every token `ytsaurus-client` could read (module docstring)."""
    found = [os.environ.get("YT_TOKEN", "")]
    token_files: list[str | Path | None] = [os.environ.get(TOKEN_PATH_ENV), DEFAULT_TOKEN_FILE]
    config_files = [os.environ.get(CONFIG_PATH_ENV), DEFAULT_CONFIG_FILE, GLOBAL_CONFIG_FILE]
    texts = [_small_file(path, _MAX_CONFIG_FILE_BYTES) for path in config_files if path]
    for text in (os.environ.get(CONFIG_PATCHES_ENV, ""), *texts):
        for key, value in _CONFIG_VALUE.findall(text):
            (found if key == "token" else token_files).append(value)
    found += [_small_file(path, _MAX_TOKEN_FILE_BYTES).strip() for path in token_files if path]
    return found


def _small_file(path: str | Path, limit: int) -> str:
    """A small regular file's text; "" when it is missing, unreadable, bigger than `limit` or not a regular file."""
    try:
        file = Path(path).expanduser()
        if file.is_file() and file.stat().st_size <= limit:
            return file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        pass
    return ""


class Redactor:
    """Masks secrets in text and in JSON-like values; also a structlog processor (the last before rendering)."""

    def __init__(self, secrets: Iterable[str] = (), *, source: Callable[[], Iterable[str]] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._source, self._clock = source, clock
        self._read_at = clock()
        self._secrets = self._ordered(source() if source else secrets)
        self._fragments = _fragments(self._secrets)

    @staticmethod
    def _ordered(secrets: Iterable[str]) -> tuple[str, ...]:
        # Longest first, so that a secret containing another is masked whole.
        return tuple(sorted({s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True))

    @classmethod
    def from_environment(cls) -> Redactor:
        """The secrets of `known_secrets`, read again every `REFRESH_SECONDS` (a rotated token is masked too)."""
        return cls(source=known_secrets)

    def _current(self) -> tuple[str, ...]:
        if self._source is not None and self._clock() - self._read_at >= REFRESH_SECONDS:
            self._secrets, self._read_at = self._ordered(self._source()), self._clock()
            self._fragments = _fragments(self._secrets)
        return self._secrets

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        return self.mapping(event_dict)

    def text(self, text: str) -> str:
        secrets = self._current()
        for secret in secrets:
            text = text.replace(secret, REDACTED)
        if self._fragments is not None:
            text = self._fragments.masked(text)
        lowered = text.lower()
        if not any(scheme in lowered for scheme in _AUTH_SCHEMES):
            return text
        return _AUTH_VALUE.sub(lambda m: f"{m.group(1)} {REDACTED}", text)

    def value(self, value: Any) -> Any:
        """`value` with secrets masked: strings, and dicts / lists / tuples at any depth (new containers)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return self.mapping(dict(value))
        if isinstance(value, list | tuple):
            return type(value)(self.value(item) for item in value)
        return value

    def mapping(self, mapping: dict[Any, Any]) -> dict[Any, Any]:
        """Masks `mapping` in place: secret-named keys' values whole, the others by `value`."""
        for key, item in mapping.items():
            mapping[key] = REDACTED if is_secret_key(key) and item else self.value(item)
        return mapping


class _Fragments:
    """Every `MIN_SECRET_LENGTH`-character piece of the secrets, found without a scan per piece: each such piece holds
    a whole aligned block of `_BLOCK` characters of its secret (`secret[k*_BLOCK:(k+1)*_BLOCK]`), so the text is
    searched for those few blocks with `str.find` (C speed), and around each hit the piece is grown both ways while it
    is still part of a secret. An expression alternating every piece, tried at each position of the text, took
    ~16 ms for a 335 KB `/metrics` scrape on 2 shared cores; the whole redaction of it now takes ~2.4 ms."""

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self.secrets = secrets
        self.blocks = sorted({s[i:i + _BLOCK] for s in secrets for i in range(0, len(s) - _BLOCK + 1, _BLOCK)})

    def masked(self, text: str) -> str:
        """`text` with every piece of a secret at least `MIN_SECRET_LENGTH` long masked, each as long as it runs: a
        parser's error quotes a window of its input (YSON's `context` of a malformed `YT_CONFIG_PATCHES` holds the end
        of the token), never the whole secret."""
        spans = sorted(span for block in self.blocks for at in _occurrences(text, block)
                       for span in (self._grown(text, at, left_first=True), self._grown(text, at, left_first=False))
                       if span[1] - span[0] >= MIN_SECRET_LENGTH)
        parts, at = [], 0
        for start, end in spans:
            if end <= at:
                continue
            parts += [text[at:max(start, at)], "" if start < at else REDACTED]
            at = end
        return "".join(parts) + text[at:]

    def _grown(self, text: str, at: int, left_first: bool) -> tuple[int, int]:
        """The longest stretch of `text` around the block at `at` that is part of one secret, grown to the left and
        then to the right (or the other way round: a secret that repeats itself may allow one and not the other)."""
        start, end = at, at + _BLOCK
        for left in ((True, False) if left_first else (False, True)):
            if left:
                while start > 0 and self._part(text[start - 1:end]):
                    start -= 1
            else:
                while end < len(text) and self._part(text[start:end + 1]):
                    end += 1
        return start, end

    def _part(self, piece: str) -> bool:
        return any(piece in secret for secret in self.secrets)


def _occurrences(text: str, block: str) -> list[int]:
    found, at = [], text.find(block)
    while at >= 0:
        found.append(at)
        at = text.find(block, at + 1)
    return found


def _fragments(secrets: tuple[str, ...]) -> _Fragments | None:
    return _Fragments(secrets) if secrets else None


def without_secret(text: str, secret: str | None) -> str:
    """`text` without one secret this process holds (the token a client sent): whole, whatever its length, and every
    piece of it at least `MIN_SECRET_LENGTH` long."""
    if not secret:
        return text
    return Redactor([secret]).text(text.replace(secret, REDACTED))


def is_secret_key(key: Any) -> bool:
    """Whether a key (a log field, a config key, a JSON member) names a secret."""
    return bool(SECRET_KEY.search(str(key)))


def redact(value: Any) -> Any:
    """`value` (text, or JSON-like data) with every secret this process knows masked: the one redaction."""
    return Redactor.from_environment().value(value)
