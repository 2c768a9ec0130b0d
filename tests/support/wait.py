"""Waiting for something that happens in another thread or process: `wait_until`, the one polling loop."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float, what: str | Callable[[], str], *,
               interval: float = 0.2) -> T:
    """Poll `condition` until it returns something true, and return that; fail naming `what` after `timeout`
    seconds (the machine may be busy). `what` may be a function, called at the timeout to show the latest state."""
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() >= deadline:
            awaited = what if isinstance(what, str) else what()
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {awaited}")
        time.sleep(interval)
    return result
