"""Producer mode of the `yt` sink (`producer_path`): exactly-once into a queue through a YTsaurus queue producer.

Each task pushes its rows itself, in calls of `dyn_batch_size` rows (`push_queue_producer`, each call a tablet
transaction of its own), through a producer session whose stored sequence number makes a replay skip what was
written before. Numbers come from one of (`producer_sequence`):
- `batch` (default): the micro-batch id times `SEQUENCE_STRIDE` plus the row's place among its task's rows, in a
  session per query and Spark partition (`<session>-p<partition>`). A replayed batch (same id, same rows in the
  same order per partition: Spark replays a batch from its offset log, and the transformation must be
  deterministic) is skipped row for row, wherever the crash came.
- `source`: the source row's index (the `yt` source's `include_service_columns`), in a session per source tablet
  (`<session>-t<tablet>`): queue to queue, exactly-once even when the checkpoint is lost and the query restarts
  from its consumer, as long as each output row comes from one input row (map, filter) and each task gets whole
  source tablets in order (no shuffle before the sink). The service columns are not written unless the target
  has them.
A task creates its sessions when it starts, which bumps their epochs: an older attempt of the same task still
running (a zombie Spark gave up on) is refused at its next push (`ZombieEpochError`), records the fence for opsd
(`streaming_core.producer_fences`) and fails with a message saying so. The batch's row count is limited by nothing
but the queue: no call carries more than `dyn_batch_size` rows (below YTsaurus' 100,000 rows per tablet per
transaction).

Sessions are named by `producer_session`, else by a digest of the query's checkpoint location (or name), so a query
finds its sessions again after a restart; `remove_sessions` forgets them (`opsd producer remove-sessions`).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from yt import yson

from .cluster import Cluster, ClusterError, NoSuchPathError
from .cluster.base import DOCUMENT, SORTED, ProducerSession, require_kind
from .cluster.errors import ZombieEpochError
from .cluster.producer_rows import skipped_rows
from .cluster.schema import SEQUENCE_NUMBER
from .cluster.yson_values import plain
from .log import get_logger
from .options import SEQUENCE_BY_SOURCE, SRC_ROW_INDEX, SRC_TABLET_INDEX, SinkOptions
from .producer_fences import Fence, fence_attribute, fences_path
from .write_stats import WriteStats

log = get_logger(__name__)

#: Batch mode's numbers: `batch_id * SEQUENCE_STRIDE + place`, so a task may write up to 2^32 rows per batch and a
#: query up to 2^31 batches within YTsaurus' int64 sequence numbers.
SEQUENCE_STRIDE = 1 << 32
#: The columns source mode numbers rows by (the `yt` source's service columns).
SOURCE_COLUMNS = (SRC_TABLET_INDEX, SRC_ROW_INDEX)


@dataclass(frozen=True)
class TaskPosition:
    """Which task pushes: its micro-batch, Spark partition and attempt (from Spark's `TaskContext`)."""

    batch_id: int
    partition: int
    attempt: int


def session_prefix(options: SinkOptions) -> str:
    """The sessions' common name: `producer_session`, else a digest of the checkpoint location (stable across
    restarts), else of the query name."""
    if options.producer_session:
        return options.producer_session
    key = options.checkpoint_location or options.query_name
    if not key:
        raise ValueError("producer mode needs a checkpointLocation, a queryName or the option producer_session to "
                         "name its producer sessions across restarts")
    return hashlib.sha1(key.encode()).hexdigest()[:16]


def session_name(options: SinkOptions, kind: str, index: int) -> str:
    """A task's session: `<prefix>-p<partition>` (batch numbering) or `<prefix>-t<tablet>` (source numbering)."""
    return f"{session_prefix(options)}-{kind}{index}"


def is_session_of(session_id: str, prefix: str) -> bool:
    """Whether `session_id` is one `session_name` gives for `prefix`: exactly, so that another query's sessions whose
    name begins the same (`app-p0-p1` of `producer_session: app-p0`) are never taken for those of `app`."""
    return re.fullmatch(re.escape(prefix) + r"-[pt][0-9]+", session_id) is not None


def prepare_producer(cluster: Cluster, options: SinkOptions) -> None:
    """Driver side, when the query starts: the cluster serves producers, and the producer exists (created when
    `create_producer` says so)."""
    cluster.require_queue_producers()
    producer = options.producer_path
    if options.create_producer and not cluster.exists(producer):
        cluster.create_queue_producer(producer, recursive=True, ignore_existing=True)
    if not require_kind(cluster, producer, SORTED).attributes.get("treat_as_queue_producer"):
        raise ClusterError(f"{producer}: not a queue producer (create one with `opsd producer create {producer}` or "
                           f"the option create_producer=true)")


def source_columns_missing(options: SinkOptions, names: list[str]) -> list[str]:
    """The service columns source mode needs that the DataFrame lacks (empty in batch mode)."""
    if options.producer_sequence != SEQUENCE_BY_SOURCE:
        return []
    return [c for c in SOURCE_COLUMNS if c not in names]


@dataclass
class SessionPusher:
    """One task's pushes: opens each session once (bumping its epoch), skips locally what the session holds."""

    cluster: Cluster
    options: SinkOptions
    task: TaskPosition
    sessions: dict[str, ProducerSession] = field(default_factory=dict)
    stats: WriteStats = field(default_factory=WriteStats)

    def push_chunk(self, raw: pa.Table, table: pa.Table, size: int, place: int) -> None:
        """Push one chunk: `table` (the target's columns) of the task's rows `[place, place + n)`; `raw` is the
        chunk as the DataFrame gave it (source mode reads its service columns)."""
        if self.options.producer_sequence != SEQUENCE_BY_SOURCE:
            first = self.task.batch_id * SEQUENCE_STRIDE + place
            self._push(session_name(self.options, "p", self.task.partition), table,
                       np.arange(first, first + table.num_rows, dtype=np.int64), size)
            return
        tablets = raw.column(SRC_TABLET_INDEX)
        for tablet in pc.unique(tablets).to_pylist():
            mask = pc.equal(tablets, tablet)
            numbers = raw.column(SRC_ROW_INDEX).filter(mask).to_numpy().astype(np.int64)
            self._push(session_name(self.options, "t", tablet), table.filter(mask), numbers, size)

    def _push(self, session_id: str, table: pa.Table, numbers: np.ndarray, size: int) -> None:
        session = self._session(session_id)
        known = skipped_rows(numbers, session.sequence_number)  # written before: not even sent
        rest = table.slice(known).append_column(SEQUENCE_NUMBER, pa.array(numbers[known:], pa.int64()))
        started = time.perf_counter()
        if rest.num_rows:
            try:
                result = self.cluster.push_queue_producer(
                    self.options.producer_path, self.options.path, session_id, session.epoch, rest,
                    user_meta=self._meta())
            except ZombieEpochError as e:
                record_fence(self.cluster, self.options.tuning_path,
                             Fence(session_id, session.epoch, self.task.batch_id, self.task.partition,
                                   self.task.attempt, time.time()))
                log.warning("producer_zombie_fenced", path=self.options.path, session=session_id,
                            epoch=session.epoch, batch_id=self.task.batch_id, partition=self.task.partition,
                            attempt=self.task.attempt)
                raise ZombieEpochError(
                    f"{self.options.path}: attempt {self.task.attempt} of partition {self.task.partition} of batch "
                    f"{self.task.batch_id} was fenced off: a newer attempt of the task opened producer session "
                    f"{session_id} since (this attempt's epoch {session.epoch}); its rows were refused and the newer "
                    f"attempt writes them ({e})") from None
            self.sessions[session_id] = ProducerSession(session.epoch, result.last_sequence_number,
                                                        session.user_meta)
            self.stats = self.stats.call(rest.num_rows - result.skipped_row_count, time.perf_counter() - started,
                                         size)
            known += result.skipped_row_count
        self.stats = self.stats.producer(skipped=known)

    def _session(self, session_id: str) -> ProducerSession:
        if session_id not in self.sessions:
            session = self.cluster.create_queue_producer_session(
                self.options.producer_path, self.options.path, session_id, user_meta=self._meta())
            self.sessions[session_id] = session
            self.stats = self.stats.producer(sessions=1, epoch_bumps=int(session.epoch > 0))
        return self.sessions[session_id]

    def _meta(self) -> dict[str, Any]:
        """What travels with the session: whose query, which batch, which task attempt."""
        return {"query": self.options.query_name or session_prefix(self.options), "batch_id": self.task.batch_id,
                "partition": self.task.partition, "attempt": self.task.attempt}

    def push_all(self, pairs: Iterator[tuple[pa.Table, pa.Table]], size: int) -> WriteStats:
        """Push every (raw, target) chunk in order; returns the task's statistics (`rows`: the rows written)."""
        place = 0
        for raw, table in pairs:
            self.push_chunk(raw, table, size, place)
            place += table.num_rows
        return self.stats


@dataclass(frozen=True)
class StoredSession:
    """A session as the producer table holds it: the queue it writes, its id, epoch, last number and `user_meta`
    (plain values)."""

    queue: str
    session: str
    epoch: int
    sequence_number: int
    user_meta: Any = None


def stored_sessions(cluster: Cluster, producer_path: str, queue_path: str | None = None,
                    prefix: str | None = None) -> list[StoredSession]:
    """The producer's sessions (of `queue_path` and of `prefix` only, when given: `is_session_of`), in key order."""
    found = []
    for row in cluster.select_rows(producer_path):
        session_id, meta = str(row["session_id"]), row.get("user_meta")
        if (queue_path is not None and row["queue_path"] != queue_path) or \
                (prefix is not None and not is_session_of(session_id, prefix)):
            continue
        found.append(StoredSession(str(row["queue_path"]), session_id, int(row["epoch"]), int(row["sequence_number"]),
                                   plain(yson.loads(meta)) if isinstance(meta, bytes) else meta))
    return found


def remove_sessions(cluster: Cluster, producer_path: str, queue_path: str, prefix: str) -> list[str]:
    """Forget every session of `producer_path` for `queue_path` of `prefix` (a deleted query's); returns
    their ids."""
    removed = []
    for stored in stored_sessions(cluster, producer_path, queue_path, prefix):
        cluster.remove_queue_producer_session(producer_path, queue_path, stored.session)
        removed.append(stored.session)
    return removed


def record_fence(cluster: Cluster, tuning_path: str | None, fence: Fence) -> None:
    """Worker, when a push was refused for an older epoch: store the fence; never raises."""
    path = fences_path(tuning_path)
    if path is None:
        return
    name = f"{path}/@{fence_attribute(fence)}"
    try:
        try:
            cluster.set(name, asdict(fence))
        except NoSuchPathError:
            cluster.create(DOCUMENT, path, recursive=True, ignore_existing=True)
            cluster.set(name, asdict(fence))
    except ClusterError as e:
        log.warning("producer_fence_not_recorded", path=path, session=fence.session, error=str(e))


def read_fences(cluster: Cluster, tuning_path: str | None) -> tuple[Fence, ...]:
    """The query's recorded fences, oldest first (none without a document, or when it cannot be read)."""
    path = fences_path(tuning_path)
    if path is None:
        return ()
    try:
        attributes = cluster.get(f"{path}/@") if cluster.exists(path) else {}
    except ClusterError as e:
        log.warning("producer_fences_unreadable", path=path, error=str(e))
        return ()
    found = [f for v in (attributes.values() if isinstance(attributes, Mapping) else ()) if
             (f := Fence.from_document(v)) is not None]
    return tuple(sorted(found, key=lambda f: f.at))
