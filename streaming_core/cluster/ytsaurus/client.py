"""How the YTsaurus backend reaches the cluster: the `YtClient` factory and the wire arguments of row calls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yt.wrapper as yt

from .rows import WIRE_FORMAT

#: The keyword arguments of every `yt.wrapper` call that sends or returns rows: Python rows, in `WIRE_FORMAT`.
WIRE = {"format": WIRE_FORMAT, "raw": False}

ClientFactory = Callable[[str, str | None, dict[str, Any] | None], Any]


def default_client_factory(proxy: str, token: str | None, config: dict[str, Any] | None) -> yt.YtClient:
    """A real `YtClient`; tests pass a fake factory instead."""
    return yt.YtClient(proxy=proxy, token=token, config=config)
