"""The embedded cluster's automatic trimming: every queue trimmed by its `@auto_trim_config`, as YTsaurus' Queue Agent
trims (`streaming_core.auto_trim` holds the rule; the stand-in's `queue_agent` serves the agent's other half, its
attributes).

`AutoTrimmer.run_pass()` makes one pass over the cluster's queues at the trimmer's clock, so a test drives trimming
deterministically (an injected clock, one pass when it asks); `start()` runs passes every `period_seconds` on a
thread (the stand-in runs one when asked), as the Queue Agent's passes every few seconds do.

The lifetime rule needs each row's write time: the `$timestamp` column, which the embedded cluster stamps in
microseconds. A queue without it keeps the rows whose age it cannot know (YTsaurus knows every row's commit time;
add `$timestamp` to a queue that trims by lifetime, as its docs recommend).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streaming_core.log import get_logger

from ...auto_trim import AUTO_TRIM_ATTRIBUTE, AutoTrimConfig, trim_limit, vital_for
from ..base import TabletInfo
from ..errors import ClusterError
from ..schema import TIMESTAMP
from .nodes import with_attribute

if TYPE_CHECKING:
    from . import EmbeddedCluster

log = get_logger(__name__)


@dataclass(frozen=True)
class Trim:
    """One partition trimmed by a pass: its trimmed row count before and after."""

    queue: str
    partition: int
    before: int
    after: int


class AutoTrimmer:
    """Applies `@auto_trim_config` to the queues of one embedded cluster (see the module docstring)."""

    def __init__(self, cluster: EmbeddedCluster, *, clock: Callable[[], float] = time.time, period_seconds: float = 5.0
                 ) -> None:
        self.cluster = cluster
        self.clock = clock
        self.period_seconds = period_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_pass(self, queues: list[str] | None = None) -> list[Trim]:
        """Trim every queue with trimming enabled (or those of `queues`) as far as its config allows now. A queue
        whose config or consumers cannot be read is skipped and logged; the others are trimmed."""
        now = self.clock()
        trims: list[Trim] = []
        for path, value in with_attribute(self.cluster._conn, AUTO_TRIM_ATTRIBUTE):
            if queues is not None and path not in queues:
                continue
            try:
                trims += self._trim_queue(path, AutoTrimConfig.from_yt(path, value), now)
            except (ClusterError, ValueError) as e:  # a bad config (ValueError names the field) or a cluster error
                log.warning("auto_trim_skipped", queue=path, error=str(e))
        return trims

    def _trim_queue(self, path: str, config: AutoTrimConfig, now: float) -> list[Trim]:
        if not config.enable:
            return []
        vital = [r for r in self.cluster.list_queue_consumer_registrations(queue_path=path) if r.vital]
        offsets = {r.consumer_path: self.cluster.get_consumer_offsets(r.consumer_path, path) for r in vital}
        timestamped = TIMESTAMP in self.cluster.get_schema(path).names
        trims = []
        for info in self.cluster.get_tablet_infos(path):
            p = info.tablet_index
            before = None if config.retained_lifetime_seconds is None else \
                self._written_before(path, info, now - config.retained_lifetime_seconds, timestamped)
            limit = trim_limit(config, row_count=info.total_row_count, written_before_barrier=before,
                               vital_offsets=[offsets[r.consumer_path].get(p, 0) for r in vital
                                              if vital_for(r.partitions, p)])
            if limit is not None and limit > info.trimmed_row_count:
                self.cluster.trim_rows(path, p, limit)
                trims.append(Trim(path, p, info.trimmed_row_count, limit))
                log.info("auto_trimmed", queue=path, partition=p, trimmed_row_count=limit,
                         before=info.trimmed_row_count)
        return trims

    def _written_before(self, path: str, info: TabletInfo, barrier: float, timestamped: bool) -> int:
        """How many of the partition's first rows were written before `barrier` (unix seconds): a binary search over
        the `$timestamp`s (non-decreasing in a partition) of the rows still there; without `$timestamp`, the rows
        already trimmed only."""
        lower, upper = info.trimmed_row_count, info.total_row_count
        if not timestamped:
            return lower
        while lower < upper:
            middle = (lower + upper) // 2
            batches = list(self.cluster.read_tablet(path, info.tablet_index, middle, middle + 1, columns=[TIMESTAMP]))
            if batches[0].column(0)[0].as_py() / 1e6 < barrier:
                lower = middle + 1
            else:
                upper = middle
        return lower

    def start(self) -> AutoTrimmer:
        """Pass every `period_seconds` on a daemon thread until `stop()`."""
        def loop() -> None:
            while not self._stop.wait(self.period_seconds):
                try:
                    self.run_pass()
                except ClusterError as e:  # the cluster's own trouble: the next pass tries again
                    log.warning("auto_trim_pass_failed", error=str(e))

        self._thread = threading.Thread(target=loop, name="auto-trimmer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
