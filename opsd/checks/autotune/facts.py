"""What the auto-tuner collects about one query, as plain data: its recent batches (rows, durations by phase), the
values in force, its backlog and time to drain, its OOM risk and safe cap, its last failure (and the batch it left
planned), and its sink's write statistics. Built by `collect`, read by `evaluate`; tests build them by hand."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from opsd.observe.phases import PhaseShares
from opsd.observe.progress import BatchSummary
from opsd.results.autotune import ReplanRefusal, TunerMode
from opsd.results.oom import OomVerdict

if TYPE_CHECKING:  # its module reads the cluster, which the evaluate and decide steps must not import
    from streaming_core.write_stats import WriteStats


@dataclass(frozen=True)
class Uncommitted:
    """The newest batch of the query's checkpoint: planned, never committed (the batch a failed run died in)."""

    batch_id: int
    #: Rows of its largest partition (None: unknown): planning it again helps only under a smaller cap.
    partition_rows: int | None = None
    #: Why planning it again could lose or duplicate output; None when the sink holds none of it.
    unsafe: ReplanRefusal | None = None


@dataclass(frozen=True)
class Facts:
    query: str
    #: `recommend` or `apply` (a query in mode `off` is never collected).
    mode: TunerMode
    #: None: no cap (with `reads_queue`), or not a yt source.
    max_rows_per_partition: int | None
    #: None: not a yt sink.
    dyn_batch_size: int | None
    #: Its recent batches that carry a duration, oldest first.
    batches: tuple[BatchSummary, ...] = ()
    #: The query reads a yt queue through a tuning document (it has the `max_rows_per_partition` knob).
    reads_queue: bool = True
    trigger_interval_seconds: float | None = None
    backlog_rows: int | None = None
    time_to_drain_seconds: float | None = None
    #: The OOM check's verdict on the next batch, as the status keeps it (None until it judged one: then the risk
    #: and the safe caps are unknown and the tuner is conservative about them).
    oom: OomVerdict | None = None

    @property
    def oom_risk(self) -> float | None:
        return self.oom.risk if self.oom else None

    @property
    def safe_max_rows_per_partition(self) -> int | None:
        return self.oom.safe_max_rows_per_partition if self.oom else None

    @property
    def safe_max_bytes_per_partition(self) -> int | None:
        return self.oom.safe_max_bytes_per_partition if self.oom else None
    #: Spark's failure text of the query's last termination while it is not running, else None.
    failure: str | None = None
    #: What identifies that failure (the failed run's id): a failure is acted on once.
    failed_run: str | None = None
    #: After a failure, the batch planned and not committed, which a restart would replay with its range.
    uncommitted: Uncommitted | None = None
    write: WriteStats | None = None
    #: The largest rows per insert call the sink would use (the configured upper bound, clamped by the
    #: rows-per-transaction rule of `streaming_core.tuning`).
    dyn_batch_size_ceiling: int | None = None
    #: The byte cap in force (None: none, or not a yt source).
    max_bytes_per_partition: int | None = None
    #: Where its recent batches spent their time (the phases check; None until it measured one).
    phases: PhaseShares | None = None
