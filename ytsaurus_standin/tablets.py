"""Tablet states as a YTsaurus master moves them, for the stand-in's `mount_table` / `unmount_table`.

YTsaurus mounts and unmounts asynchronously: `unmount_table` returns while the tablets are `unmounting` (clients
that ask `sync` poll `@tablet_state`), and a remount leaves the proxies' mount caches stale for a moment, so row
commands answer "no such tablet" (1701) until the cache catches up. An unmounted table's rows are neither read nor
written (`select_rows` / `lookup_rows` / inserts: 1702), and `get_tablet_infos` goes to the tablets' cells, which an
unmounted tablet has none of: a generic error, not 1702 (`client_dynamic_tables_impl.cpp`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from streaming_core.cluster.embedded import normalize_path

from .errors import GENERIC, NO_SUCH_TABLET, TABLET_NOT_MOUNTED, YtCodedError

#: How long an unmount or a mount stays in progress (and a remount's mount caches stale), in seconds.
STATE_CHANGE_SECONDS = 0.3
MOUNTED, UNMOUNTED, MOUNTING, UNMOUNTING = "mounted", "unmounted", "mounting", "unmounting"


class TabletStates:
    """Each table's tablet state, every table `mounted` until unmounted."""

    def __init__(self, change_seconds: float = STATE_CHANGE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.change_seconds = change_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._changes: dict[str, tuple[str, float]] = {}  # path -> (the state asked for, when)

    def unmount(self, path: str) -> None:
        self._change(path, UNMOUNTED)

    def mount(self, path: str) -> None:
        if self.state(path) != MOUNTED:
            self._change(path, MOUNTED)

    def _change(self, path: str, target: str) -> None:
        with self._lock:
            self._changes[normalize_path(path)] = (target, self._clock())

    def state(self, path: str) -> str:
        """`@tablet_state`: the state asked for once `change_seconds` have passed, its `-ing` form until then."""
        with self._lock:
            target, since = self._changes.get(normalize_path(path), (MOUNTED, float("-inf")))
        if self._clock() - since >= self.change_seconds:
            return target
        return MOUNTING if target == MOUNTED else UNMOUNTING

    def stale(self, path: str) -> bool:
        """Whether the proxies' mount caches still hold the tablets of before a remount."""
        with self._lock:
            target, since = self._changes.get(normalize_path(path), (MOUNTED, float("-inf")))
        return target == MOUNTED and self._clock() - since < 2 * self.change_seconds

    def require_rows(self, path: str) -> None:
        """Rows of the table can be read and written: 1702 while not mounted, 1701 while mount caches are stale."""
        state = self.state(path)
        if state != MOUNTED and state != MOUNTING:
            raise YtCodedError(TABLET_NOT_MOUNTED, f"Table {path} is not mounted")
        if self.stale(path):
            raise YtCodedError(NO_SUCH_TABLET, f"No such tablet of {path} (the mount cache is stale after a remount)")

    def require_cells(self, path: str) -> None:
        """The tablets have cells to ask (`get_tablet_infos`): a generic error otherwise, and 1701 while the mount
        caches are stale after a remount."""
        if self.state(path) != MOUNTED:
            raise YtCodedError(GENERIC, f"Cannot reach the tablet cell of {path}: no cell is known for its tablets")
        if self.stale(path):
            raise YtCodedError(NO_SUCH_TABLET, f"No such tablet of {path} (the mount cache is stale after a remount)")
