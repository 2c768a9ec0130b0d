"""Text from data on a terminal: never markup, never a control sequence, never a secret.

Queue rows, paths, query names and exception texts may hold anything: `[link=...]` or `[/oops]` (rich markup,
which would print a link or fail with a `MarkupError`), ESC sequences (which set the terminal's title or
colours), carriage returns and bidirectional overrides (which hide what precedes them). Every data-derived string
the CLI, the doctor and the demo print goes through `Shown`: rich gets it as a `rich.text.Text` (never parsed as
markup), control and bidi characters are written as escapes (`\\x1b`, `\\u202e`), and secrets are masked by
`opsd.telemetry.redaction`. Console log lines escape the same characters (`opsd.telemetry.logs`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from rich.text import Text

from opsd.telemetry.redaction import Redactor

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional marks, embeddings, overrides and isolates.
_CONTROLS = r"\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNPRINTABLE = re.compile(f"[{_CONTROLS}]")
# ... and for one-line texts (an error line, a heal line) the newline too.
_UNPRINTABLE_IN_A_LINE = re.compile(f"[{_CONTROLS}\\n]")


_NAMED = {"\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")


def printable(text: str, *, one_line: bool = False) -> str:
    """`text` with control and bidi characters written as escapes (`\\x1b`); newlines too when `one_line`."""
    return (_UNPRINTABLE_IN_A_LINE if one_line else _UNPRINTABLE).sub(_escape, text)


# What JSON leaves unescaped with `ensure_ascii=False` but a terminal acts on: DEL, C1 controls, bidi characters.
_UNPRINTABLE_IN_JSON = re.compile(r"[\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def json_line(value: Any) -> str:
    """`value` as one line of JSON that keeps non-ASCII text readable but writes every character a terminal would
    act on as a `\\uXXXX` escape (JSON escapes C0 controls itself); it parses back to `value`."""
    return _UNPRINTABLE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, ensure_ascii=False))


class Shown:
    """Makes data safe to print: `shown(value)` a rich `Text`, `shown.line(value)` a plain one-line string.

    Built once per command (it reads the secrets to mask once); `None` shows as `-`.
    """

    def __init__(self, redactor: Redactor | None = None) -> None:
        self._redactor = redactor or Redactor.from_environment()

    def line(self, value: Any, *, one_line: bool = True) -> str:
        text = "-" if value is None else value if isinstance(value, str) else str(value)
        return printable(self._redactor.text(text), one_line=one_line)

    def __call__(self, value: Any, *, style: str = "") -> Text:
        return Text(self.line(value, one_line=False), style=style)
