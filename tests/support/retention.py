"""A job whose queue trims itself: a 2-partition queue with `@auto_trim_config`, the job's consumer and checkpoint,
and another job's consumer registered as vital; and a clock the test sets, for the checks and the queue agent."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from streaming_core.auto_trim import AUTO_TRIM_ATTRIBUTE, AutoTrimConfig
from streaming_core.cluster import Cluster
from tests.support.checkpoint import job_with_checkpoint
from tests.support.wait import registered_and_seen

#: The config of `retention_job` unless told: trimming on, keeping 10 rows per partition.
KEEP_TEN = AutoTrimConfig(True, 10)


class Clock:
    """Unix seconds the test sets (`now`) or moves (`advance`)."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


@dataclass(frozen=True)
class RetentionJob:
    queue: str
    consumer: str
    other: str
    location: str

    def produce(self, cluster: Cluster, rows_per_partition: int) -> None:
        cluster.insert_rows(self.queue, [{"data": "x", "n": i, "$tablet_index": p}
                                         for p in (0, 1) for i in range(rows_per_partition)])

    def other_reads_to(self, cluster: Cluster, offset: int) -> None:
        """The other job's vital consumer moves to `offset` on both partitions."""
        for p in (0, 1):
            cluster.advance_consumer(self.other, self.queue, p, None, offset)


def retention_job(cluster: Cluster, root: str, location: Path, *, rows: int = 40, read_to: int = 10,
                  other_at: int | None = None, config: AutoTrimConfig | None = KEEP_TEN,
                  other_vital: bool = True) -> RetentionJob:
    """A queue of `rows` rows (half per partition), the job's consumer and committed checkpoint at `read_to` on both
    partitions, the other job's consumer (vital unless told) at `other_at` (default: the queue's end) and the queue's
    `@auto_trim_config` (None: not set)."""
    queue, consumer, location_text = job_with_checkpoint(
        cluster, root, location, {0: {0: read_to - 1, 1: read_to - 1}}, committed=0, rows=rows, consumer_at=read_to)
    job = RetentionJob(queue, consumer, f"{root}/other_consumer", location_text)
    cluster.create_consumer(job.other, recursive=True)
    registered_and_seen(cluster, queue, job.other, vital=other_vital)
    job.other_reads_to(cluster, rows // 2 if other_at is None else other_at)
    if config is not None:
        cluster.set(f"{queue}/@{AUTO_TRIM_ATTRIBUTE}", config.to_yt())
    return job
