"""The sink's write statistics: per micro-batch, the insert calls its tasks made (rows, seconds, slowest call,
retries, errors), kept in a small document next to the sink's tuning document so that opsd can read them.

The tasks' `write()` run in Spark workers and the batch's `commit` / `abort` in a runner process, so each task
counts its own calls into a `WriteStats` carried in its commit message, and `commit` / `abort` sums them and
stores the batch's total in the cluster (the only place every process and opsd reach). The document keeps the
last batch only: the auto-tuner reads it at every run. A failure to store it is logged, never raised: statistics
must not fail a batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields, replace

from .cluster import Cluster, ClusterError
from .cluster.base import DOCUMENT
from .log import get_logger

log = get_logger(__name__)


def write_stats_path(tuning_path: str | None) -> str | None:
    """Where a sink's statistics live: next to the tuning document it reads."""
    return f"{tuning_path}_write_stats" if tuning_path else None


@dataclass(frozen=True)
class WriteStats:
    """Insert calls of one task, or summed over a batch (`batch_id` and `at` set then)."""

    calls: int = 0
    rows: int = 0
    seconds: float = 0.0
    max_call_seconds: float = 0.0
    #: rows per call in force when the calls were made (the largest over the tasks).
    dyn_batch_size: int = 0
    retries: int = 0
    errors: int = 0
    #: aborts of the batch whose cleanup failed (logged as `sink_abort_failed`; an abort never raises).
    abort_failures: int = 0
    #: producer mode (`streaming_core.sink_producer`): sessions the tasks opened, how many of those bumped the epoch
    #: of an existing session (a task started again, or the next batch), rows skipped as written before.
    producer_sessions: int = 0
    producer_epoch_bumps: int = 0
    producer_skipped_rows: int = 0
    batch_id: int | None = None
    at: float | None = None

    def call(self, rows: int, seconds: float, size: int) -> WriteStats:
        """These statistics with one more call of `rows` rows that took `seconds`, made with rows per call `size`."""
        return replace(self, calls=self.calls + 1, rows=self.rows + rows, seconds=self.seconds + seconds,
                       max_call_seconds=max(self.max_call_seconds, seconds),
                       dyn_batch_size=max(self.dyn_batch_size, size))

    def producer(self, *, sessions: int = 0, epoch_bumps: int = 0, skipped: int = 0) -> WriteStats:
        """These statistics with producer sessions opened and rows skipped added."""
        return replace(self, producer_sessions=self.producer_sessions + sessions,
                       producer_epoch_bumps=self.producer_epoch_bumps + epoch_bumps,
                       producer_skipped_rows=self.producer_skipped_rows + skipped)

    @classmethod
    def total(cls, parts: Iterable[WriteStats | None], batch_id: int, at: float, errors: int = 0,
              abort_failures: int = 0) -> WriteStats:
        """A batch's statistics from its tasks' (a failed task has none: `errors` counts it)."""
        known = [p for p in parts if p is not None]
        return cls(sum(p.calls for p in known), sum(p.rows for p in known), sum(p.seconds for p in known),
                   max((p.max_call_seconds for p in known), default=0.0),
                   max((p.dyn_batch_size for p in known), default=0), sum(p.retries for p in known),
                   sum(p.errors for p in known) + errors, abort_failures,
                   sum(p.producer_sessions for p in known), sum(p.producer_epoch_bumps for p in known),
                   sum(p.producer_skipped_rows for p in known), batch_id, at)

    @classmethod
    def from_document(cls, value: object) -> WriteStats | None:
        if not isinstance(value, dict):
            return None
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in value.items() if k in known})


def record_write_stats(cluster: Cluster, tuning_path: str | None, stats: WriteStats) -> None:
    """Store a batch's statistics (replacing the previous batch's); never raises."""
    path = write_stats_path(tuning_path)
    if path is None:
        return
    try:
        if not cluster.exists(path):
            cluster.create(DOCUMENT, path, recursive=True, ignore_existing=True)
        cluster.set(path, asdict(stats))
    except ClusterError as e:
        log.warning("write_stats_not_recorded", path=path, batch_id=stats.batch_id, error=str(e))


def read_write_stats(cluster: Cluster, tuning_path: str | None) -> WriteStats | None:
    """The last batch's statistics, None when there are none (or they cannot be read)."""
    path = write_stats_path(tuning_path)
    if path is None:
        return None
    try:
        return WriteStats.from_document(cluster.get(path)) if cluster.exists(path) else None
    except (ClusterError, TypeError) as e:
        log.warning("write_stats_ignored", path=path, error=str(e))
        return None
