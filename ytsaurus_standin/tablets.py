"""Tablet states as a YTsaurus master moves them, for the stand-in's `mount_table` / `unmount_table`.

YTsaurus mounts and unmounts asynchronously: `unmount_table` returns while the tablets are `unmounting` (clients
that ask `sync` poll `@tablet_state`), and a remount leaves the proxies' mount caches stale for a moment, so row
commands answer "no such tablet" (1701) until the cache catches up. An unmounted table's rows are neither read nor
written (`select_rows` / `lookup_rows` / inserts: 1702), and `get_tablet_infos` goes to the tablets' cells, which an
unmounted tablet has none of: a generic error, not 1702 (`client_dynamic_tables_impl.cpp`).

Trimming is asynchronous too: `trim_rows` moves a tablet's trimmed row count at once, but the chunks of the trimmed
rows are detached later, by the tablet node, while the tablet is mounted. A reshard to fewer tablets refuses a tablet
it would drop while they are attached (`yt/yt/server/master/tablet_server/tablet.cpp` `ValidateReshardRemove`:
"Some chunks of tablet ... are not fully trimmed"), so "trim, then reshard at once" fails. Here a tablet's trimmed
chunks are detached once it has been mounted for `change_seconds` since the trimmed row count was first seen.
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
        #: (path, tablet) -> (the trimmed row count seen, when its chunks' detach started; inf: at the next mount)
        self._trims: dict[tuple[str, int], tuple[int, float]] = {}

    def unmount(self, path: str) -> None:
        self._change(path, UNMOUNTED)
        self._retime_trims(path, lambda since, now: float("inf") if now - since < self.change_seconds else since)

    def mount(self, path: str) -> None:
        if self.state(path) != MOUNTED:
            self._change(path, MOUNTED)
        self._retime_trims(path, lambda since, now: now if since == float("inf") else since)

    def _retime_trims(self, path: str, retime: Callable[[float, float], float]) -> None:
        now, path = self._clock(), normalize_path(path)
        with self._lock:
            for key, (count, since) in self._trims.items():
                if key[0] == path:
                    self._trims[key] = (count, retime(since, now))

    def trimmed_chunks_attached(self, path: str, tablet_index: int, trimmed_row_count: int) -> bool:
        """Whether chunks of the tablet's trimmed rows are still attached: a trimmed row count seen for the first time
        starts their detach (at once while mounted, at the next mount otherwise)."""
        key, now = (normalize_path(path), tablet_index), self._clock()
        mounted = self.state(path) == MOUNTED
        with self._lock:
            count, since = self._trims.get(key, (0, float("-inf")))
            if trimmed_row_count != count:
                count, since = trimmed_row_count, now if mounted else float("inf")
                self._trims[key] = (count, since)
        return count > 0 and now - since < self.change_seconds

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
