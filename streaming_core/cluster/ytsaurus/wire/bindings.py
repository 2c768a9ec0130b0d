"""The `ytsaurus-yson` bindings (C++ YSON parser and writer), required by the YTsaurus backend.

`ytsaurus-client` alone parses and writes YSON in pure Python, about 300 times slower than the bindings
(~4,000 rows/s against ~1,000,000 for rows of three columns, `python -m bench.wire`): too slow to read a
queue. So rows never fall back to it: where the bindings cannot be imported, loading this module raises
`YsonBindingsError`, which names the reason and the cost, and the `yt://` backend cannot be used at all.
"""

from __future__ import annotations

from ...errors import YsonBindingsError

try:
    import yt_yson_bindings as _bindings
except ImportError as error:
    raise YsonBindingsError(
        f"the YSON bindings (package 'ytsaurus-yson') cannot be loaded: {error}. The yt:// backend needs them: "
        "without them every row would be parsed in pure Python, ~300x slower (~4,000 rows/s instead of "
        "~1,000,000). Install them with 'pip install ytsaurus-yson'"
    ) from error

loads = _bindings.loads
dumps = _bindings.dumps


def reason(error: Exception) -> str:
    """The innermost line of a YSON parse error (`YsonError`'s text goes on with a dump of its context)."""
    summary = str(error).split("***** Details")[0].strip()
    return summary.splitlines()[-1].strip() if summary else type(error).__name__


__all__ = ["YsonBindingsError", "dumps", "loads", "reason"]
