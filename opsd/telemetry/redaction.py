"""Secret redaction: what every text leaving opsd's process passes through before it is written anywhere.

`redact(value)` is the one function: log lines of every format (`opsd.telemetry.logs` runs it as the last
processor before rendering, over formatted tracebacks too), `/status`, `/readyz` and `/metrics`
(`opsd.telemetry.http`), the CLI's tables and error lines (`opsd.telemetry.terminal`), `opsd doctor` and config
errors (`opsd.config.load`). It masks

- the value of every key that names a secret (`SECRET_KEY`: token, password, secret, authorization, ...), at any
  depth of dicts and lists;
- every occurrence of a secret this process knows: `$YT_TOKEN`, and the contents of `$YT_TOKEN_PATH` and of
  `~/.yt/token` (the places `ytsaurus-client` reads a token from);
- `OAuth` / `Bearer` / `Basic` credentials in free text (an `Authorization` header echoed in an error).

Secrets shorter than `MIN_SECRET_LENGTH` are left alone: they are too likely to occur in ordinary text.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from structlog.typing import EventDict, WrappedLogger

REDACTED = "***"
#: A key (a log field, a config key, a JSON member) whose value is a secret.
SECRET_KEY = re.compile(r"token|password|passwd|secret|authorization|api[_-]?key|credential", re.IGNORECASE)
# An HTTP authorization value inside a message: "Authorization: OAuth AQAD-...", "Bearer eyJ...".
_AUTH_VALUE = re.compile(r"\b(OAuth|Bearer|Basic)\s+[^\s'\",]+", re.IGNORECASE)
# Looked for before the expression runs: a substring test is ~50 times faster on a large text (a scrape's body).
_AUTH_SCHEMES = ("oauth", "bearer", "basic")
MIN_SECRET_LENGTH = 8
#: Where `ytsaurus-client` finds a token besides `$YT_TOKEN`: the file `$YT_TOKEN_PATH` names, else this one.
TOKEN_PATH_ENV = "YT_TOKEN_PATH"
DEFAULT_TOKEN_FILE = Path("~/.yt/token")
# A token file is a line of text; anything bigger is not one.
_MAX_TOKEN_FILE_BYTES = 4096


def known_secrets() -> list[str]:
    """The secrets this process may hold: `$YT_TOKEN` and the token files `ytsaurus-client` reads."""
    found = [os.environ.get("YT_TOKEN", "")]
    for path in (os.environ.get(TOKEN_PATH_ENV), DEFAULT_TOKEN_FILE):
        if not path:
            continue
        try:
            file = Path(path).expanduser()
            if file.is_file() and file.stat().st_size <= _MAX_TOKEN_FILE_BYTES:
                found.append(file.read_text(encoding="utf-8", errors="replace").strip())
        except OSError:
            continue
    return found


class Redactor:
    """Masks secrets in text and in JSON-like values; also a structlog processor (the last before rendering)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so that a secret containing another is masked whole.
        self._secrets = tuple(sorted({s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True))

    @classmethod
    def from_environment(cls) -> Redactor:
        return cls(known_secrets())

    def __call__(self, logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
        return self.mapping(event_dict)

    def text(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
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


def is_secret_key(key: Any) -> bool:
    """Whether a key (a log field, a config key, a JSON member) names a secret."""
    return bool(SECRET_KEY.search(str(key)))


def redact(value: Any) -> Any:
    """`value` (text, or JSON-like data) with every secret this process knows masked: the one redaction of opsd."""
    return Redactor.from_environment().value(value)
