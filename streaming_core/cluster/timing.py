"""Process-wide stopwatches of the cluster's read paths: how long this process spent decoding rows (the wire's
YSON into Arrow on YTsaurus, Arrow IPC chunks on the embedded cluster).

A Spark Python worker runs one task at a time, so the task reads the stopwatch before and after its rows and takes
the difference (`streaming_core.phases`); the rest of its time in the cluster's read calls is waiting for the
cluster. A reading costs a `perf_counter` call at each end of a decode, nothing per row.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class Stopwatch:
    """Seconds summed over the timed sections of this process (never reset: readers take differences)."""

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        self.seconds = 0.0

    @contextmanager
    def timing(self) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - started

    def timed(self, function: Callable[P, T]) -> Callable[P, T]:
        """`function` with each of its calls timed."""
        @wraps(function)
        def timed_call(*args: P.args, **kwargs: P.kwargs) -> T:
            with self.timing():
                return function(*args, **kwargs)
        return timed_call


#: Rows decoded from what the cluster returned into Arrow.
DECODE = Stopwatch()
