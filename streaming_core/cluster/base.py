"""The cluster interface: the one way `streaming_core` and `opsd` talk to storage.

Names and semantics follow `yt.wrapper` (YTsaurus): a path tree under `//`, ordered dynamic tables
("queues") split into tablets, consumers with the YT consumer schema, sorted dynamic tables, static
tables, small documents and tablet transactions. Two implementations honour it: `EmbeddedCluster`
(local disk, the default) and `YtsaurusCluster` (`ytsaurus-client`). One contract suite
(`tests/support/cluster_contract.py`) runs against both.

Rows cross this interface as `pyarrow` data for bulk paths (append, read) and as plain dicts for small
ones (lookups, consumer rows). Every method may be called from any process: implementations hold no
state that another process would need.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from .errors import SchemaError, TrimmedRowsError, UntrimmedTabletsError, VitalConsumerError
from .schema import TableSchema

#: YTsaurus' limit on the tablets of one table (`MaxTabletCount`); the embedded cluster keeps it too.
MAX_TABLET_COUNT = 10_000
#: YTsaurus refuses more rows than this per tablet in one transaction: the YTsaurus backend's
#: `max_rows_per_tablet_transaction`; the sink's insert calls (`dyn_batch_size`, as SPYT's `dynBatchSize`) stay
#: below it.
MAX_ROWS_PER_TABLET_TRANSACTION = 100_000
#: The bounds of one Arrow batch read from the cluster, and so of one batch the source hands to Spark: far below the
#: JVM's direct memory whatever the micro-batch's size (a single Arrow batch larger than it kills a local driver).
#: 16 MiB is also YTsaurus' own bound on the data weight of one queue pull, which a read of the YTsaurus backend is.
READ_BATCH_ROWS = 65_536
READ_BATCH_BYTES = 16 * 1024 * 1024
#: Reads of `Cluster.read_kept` that may each find their first rows trimmed meanwhile before it gives up.
KEPT_READ_ATTEMPTS = 3
#: The first YTsaurus release that serves queue producers (`push_queue_producer`), named when a cluster lacks them.
QUEUE_PRODUCERS_SINCE = "24.1"
#: Rows of one `pull_consumer` call when the caller names no bound (YTsaurus' default too).
PULL_ROWS = 1000
#: How often a registration not seen yet (`Cluster.registration_visible_within_seconds`) is looked for again.
REGISTRATION_POLL_SECONDS = 0.25


def wait_for_registration(attempt: Callable[[], bool], within_seconds: float, on_wait: Callable[[], None]) -> bool:
    """Try `attempt()` until it says the registration was seen (True), every `REGISTRATION_POLL_SECONDS` for at most
    `within_seconds` (a YTsaurus proxy sees a fresh registration only after its cache's refresh); `on_wait()` once,
    before the first wait. Returns whether it was seen. The one wait for a fresh registration: the source's and the
    CLI's look at the registrations and the YTsaurus backend's pulls go through it."""
    deadline = time.monotonic() + within_seconds
    waiting = False
    while not attempt():
        if time.monotonic() >= deadline:
            return False
        if not waiting:
            waiting = True
            on_wait()
        time.sleep(REGISTRATION_POLL_SECONDS)
    return True

#: Node types, as YTsaurus names them (`@type`).
MAP_NODE = "map_node"
TABLE = "table"
DOCUMENT = "document"
#: A file node (what SPYT's `YtFileSystem` writes a checkpoint's files as), and a link: read as itself with `&` after
#: its name (`//a/b&/@type`), else every command follows it to its target.
FILE = "file"
LINK = "link"
#: The node type YTsaurus' `create` takes for a queue producer (it makes a sorted dynamic table of `PRODUCER_SCHEMA`).
QUEUE_PRODUCER = "queue_producer"

#: What YTsaurus' Queue Agent computes and serves as attributes (opaque: read by name, never in `@`): on a queue its
#: status (write rates) and its partitions (row bounds, write rates), on a consumer its partitions per registered
#: queue (offset, unread rows, disposition, processing lag).
QUEUE_STATUS, QUEUE_PARTITIONS = "queue_status", "queue_partitions"
QUEUE_CONSUMER_PARTITIONS = "queue_consumer_partitions"

#: Table kinds (derived in YTsaurus from `@dynamic` and whether the schema has key columns).
ORDERED = "ordered_dynamic"
SORTED = "sorted_dynamic"
STATIC = "static"

ROWS = list[dict[str, Any]] | pa.Table | pa.RecordBatch


@dataclass(frozen=True)
class TabletInfo:
    """Row counters of one tablet, as `get_tablet_infos` returns them.

    `total_row_count` is the index of the next row to be written; rows `[0, trimmed_row_count)` are gone.
    """

    tablet_index: int
    total_row_count: int
    trimmed_row_count: int


@dataclass(frozen=True)
class Registration:
    """One queue-consumer registration (`list_queue_consumer_registrations`)."""

    queue_path: str
    consumer_path: str
    vital: bool = False
    partitions: tuple[int, ...] | None = None


@dataclass(frozen=True)
class ProducerSession:
    """A queue producer session's recovery point, as `create_queue_producer_session` returns it: the epoch a writer
    must push with, the last sequence number written (-1: none) and the `user_meta` stored with the session."""

    epoch: int
    sequence_number: int
    user_meta: Any = None


@dataclass(frozen=True)
class PushResult:
    """What `push_queue_producer` returns: the last sequence number of the rows given, and how many of them were
    skipped as written before (their numbers at or below the session's)."""

    last_sequence_number: int
    skipped_row_count: int


@dataclass(frozen=True)
class NodeInfo:
    """What `get` of a node's attributes returns that callers branch on."""

    path: str
    type: str
    kind: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)


class Transaction(abc.ABC):
    """A tablet transaction: everything done through it commits atomically or not at all.

    Use it as a context manager: leaving the block normally commits, an exception aborts.
    A crash of the process before commit leaves nothing behind.
    """

    @abc.abstractmethod
    def insert_rows(self, path: str, rows: ROWS, *, tablet_index: int | None = None) -> None:
        """Append to an ordered table or upsert into a sorted table, within the transaction."""

    @abc.abstractmethod
    def delete_rows(self, path: str, keys: Iterable[Mapping[str, Any]]) -> None:
        """Delete rows of a sorted table by key, within the transaction."""

    @abc.abstractmethod
    def lookup_rows(self, path: str, keys: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Read rows of a sorted table by key, seeing this transaction's own writes."""

    @abc.abstractmethod
    def advance_consumer(
        self, consumer_path: str, queue_path: str, partition_index: int, old_offset: int | None,
        new_offset: int,
    ) -> None:
        """Move a consumer's offset with compare-and-set (see `Cluster.advance_consumer`)."""

    @abc.abstractmethod
    def push_queue_producer(
        self, producer_path: str, queue_path: str, session_id: str, epoch: int, rows: ROWS, *,
        sequence_number: int | None = None, user_meta: Any = None,
    ) -> PushResult:
        """Write rows into a queue through a producer session, within the transaction (see
        `Cluster.push_queue_producer`)."""

    @abc.abstractmethod
    def publish_table(self, source: str, path: str) -> int:
        """Append (ordered `path`) or upsert (sorted `path`) every row of the static table `source` within the
        transaction; returns how many rows. Remove `source` after the commit: a backend may move its stored
        chunks into `path` (the embedded cluster: no row decoded or written again) or copy its rows (YTsaurus).
        """

    @abc.abstractmethod
    def commit(self) -> None: ...

    @abc.abstractmethod
    def abort(self) -> None: ...

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


class Cluster(abc.ABC):
    """Storage as `streaming_core` sees it. See the module docstring."""

    #: The cluster name written into consumer rows and checkpoint offsets (`queue_cluster`).
    name: str
    #: The URI that reopens this cluster in another process (`local:///root`, `yt://proxy`).
    uri: str
    #: Rows one tablet takes in one transaction (YTsaurus: `MAX_ROWS_PER_TABLET_TRANSACTION`); None = no limit.
    max_rows_per_tablet_transaction: int | None = None
    #: Seconds a fresh registration may stay unseen by `pull_consumer` and `list_queue_consumer_registrations`
    #: (YTsaurus: its proxies' registration cache refresh); 0 = seen at once.
    registration_visible_within_seconds: float = 0.0

    # -- path tree --------------------------------------------------------------------------------

    @abc.abstractmethod
    def exists(self, path: str) -> bool: ...

    @abc.abstractmethod
    def create(
        self, node_type: str, path: str, *, recursive: bool = False, ignore_existing: bool = False,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        """Create a node. Tables take `schema`, `dynamic` and (ordered) `tablet_count` attributes."""

    @abc.abstractmethod
    def remove(self, path: str, *, recursive: bool = False, force: bool = False) -> None: ...

    @abc.abstractmethod
    def move(self, source: str, destination: str, *, force: bool = False) -> None:
        """Move a node in one step; `force` replaces a node at `destination` (else `AlreadyExistsError`).

        The embedded cluster moves static tables only.
        """

    @abc.abstractmethod
    def list(self, path: str) -> list[str]:
        """Names of a map node's children, sorted."""

    @abc.abstractmethod
    def get(self, path: str) -> Any:
        """`get(path + "/@attr")` returns an attribute; `get(path + "/@")` all of them; a document's
        path returns its value."""

    @abc.abstractmethod
    def set(self, path: str, value: Any) -> None:
        """`set(path + "/@attr", v)` sets an attribute; a document's path sets its value."""

    def node_info(self, path: str) -> NodeInfo:
        attrs = self.get(path + "/@")
        return NodeInfo(path=path, type=attrs["type"], kind=table_kind(attrs), attributes=attrs)

    def get_schema(self, path: str) -> TableSchema:
        return TableSchema.from_yt(self.get(path + "/@schema"))

    # -- ordered dynamic tables (queues) ----------------------------------------------------------

    @abc.abstractmethod
    def insert_rows(self, path: str, rows: ROWS, *, tablet_index: int | None = None) -> None:
        """Append rows to an ordered table (to `tablet_index`, or a `$tablet_index` column, or spread
        evenly) or upsert them into a sorted table. All rows or none are written."""

    @abc.abstractmethod
    def get_tablet_infos(self, path: str) -> list[TabletInfo]: ...

    @abc.abstractmethod
    def read_tablet(
        self, path: str, tablet_index: int, lower: int, upper: int, *,
        columns: Sequence[str] | None = None, max_rows: int = READ_BATCH_ROWS,
        max_bytes: int = READ_BATCH_BYTES, service_columns: bool = False, consumer_path: str | None = None,
        schema: TableSchema | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Rows `[lower, upper)` of one tablet, in row-index order, as batches of at most `max_rows`
        rows and about `max_bytes` bytes. `service_columns` prepends `$tablet_index` and `$row_index`.
        `schema`: the queue's columns as the reader knows them, for a reader that may not read the queue's `@schema`
        (one granted the queue through its consumer only; None: the queue's own).

        With `consumer_path` the rows are read through that consumer, as its readers are authorized (YTsaurus:
        `pull_consumer`, which needs read access to the consumer and its registration for the queue, not to the
        queue table itself); `NotRegisteredError` when it is not registered for the queue.

        Raises `TrimmedRowsError` when part of the range is already trimmed.
        """

    def read_kept(self, path: str, tablet_index: int, lower: int, upper: int, *,
                  columns: Sequence[str] | None = None, max_rows: int = READ_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
        """`read_tablet` of rows `[lower, upper)` for a reader that only samples or shows them (opsd's checks, the
        CLI): the rows trimmed meanwhile (a Queue Agent trims at any time) are skipped, never an error; the rows
        still kept are read from the tablet's trim on, in order."""
        start = lower
        for attempt in range(1, KEPT_READ_ATTEMPTS + 1):
            try:
                for batch in self.read_tablet(path, tablet_index, start, upper, columns=columns, max_rows=max_rows):
                    start += batch.num_rows
                    yield batch
                return
            except TrimmedRowsError:
                if attempt == KEPT_READ_ATTEMPTS:
                    raise
                start = max(start, self.get_tablet_infos(path)[tablet_index].trimmed_row_count)
                if start >= upper:
                    return

    @abc.abstractmethod
    def read_rows_at(self, path: str, tablet_index: int, row_indexes: Sequence[int], *,
                     columns: Sequence[str] | None = None) -> pa.Table:
        """Single rows of one tablet picked by index, in one call: a `$row_index` column, then `columns` (all when
        None), in row-index order. Rows trimmed or not written yet are left out (never an error). What the source's
        byte cap probes (`streaming_core.admission`). YTsaurus: `select_rows` with `[$row_index] IN (...)`.
        """

    def trim_rows(self, path: str, tablet_index: int, trimmed_row_count: int, *,
                  past_vital_consumers: bool = False) -> None:
        """Drop rows `[0, trimmed_row_count)` of a tablet. Trimming never goes backwards.

        Like YTsaurus, a trim past the offset of a consumer registered as vital for the partition is refused
        with `VitalConsumerError` (nothing is trimmed), unless `past_vital_consumers` says to drop them anyway.
        """
        if not past_vital_consumers:
            self.check_vital_consumers(path, tablet_index, trimmed_row_count)
        self._trim_rows(path, tablet_index, trimmed_row_count)

    def check_vital_consumers(self, path: str, tablet_index: int, trimmed_row_count: int) -> None:
        """Raise `VitalConsumerError` if a vital consumer has not read rows below `trimmed_row_count` yet."""
        for reg in self.list_queue_consumer_registrations(queue_path=path):
            if not reg.vital or (reg.partitions is not None and tablet_index not in reg.partitions):
                continue
            offset = self.get_consumer_offsets(reg.consumer_path, path).get(tablet_index, 0)
            if trimmed_row_count > offset:
                raise VitalConsumerError(
                    f"{path}: cannot trim partition {tablet_index} to row {trimmed_row_count}: the vital consumer "
                    f"{reg.consumer_path} has read only up to row {offset}, so rows [{offset}, {trimmed_row_count})"
                    f" would be lost to it; trim to at most {offset}, or drop them anyway with "
                    f"`opsd queue trim --past-vital-consumers` (past_vital_consumers=True)")

    @abc.abstractmethod
    def _trim_rows(self, path: str, tablet_index: int, trimmed_row_count: int) -> None:
        """The backend's trim, without the vital-consumer check."""

    def queue_agent_attribute(self, path: str, name: str) -> Any | None:
        """An attribute the Queue Agent serves (`QUEUE_STATUS`, `QUEUE_PARTITIONS` on a queue,
        `QUEUE_CONSUMER_PARTITIONS` on a consumer), as YTsaurus returns it; None when it is not served: a cluster
        without a Queue Agent (the embedded cluster has none), or an object the agent does not watch (yet)."""
        return None

    def automatic_trimming(self) -> bool | None:
        """Whether the cluster's own trimming trims queues by their `@auto_trim_config` at all: YTsaurus' Queue Agent
        does only where its dynamic config switches `enable_automatic_trimming` on (off by default); None when
        unknown (the embedded cluster trims only where a trimmer is run)."""
        return None

    def reshard(self, path: str, tablet_count: int) -> None:
        """Give an ordered table `tablet_count` tablets: YTsaurus' `reshard_table` with `tablet_count`, between an
        unmount and a mount. Existing tablets keep their rows, row indexes and trim; added tablets start empty.

        Fewer tablets remove the last ones, and only when every row of theirs is trimmed (`UntrimmedTabletsError`
        naming them, and nothing changes, otherwise): rows never move between tablets. A running `yt` query reads
        added tablets from its consumer's offsets; one whose checkpoint has read a removed tablet stops with
        `QueueReshardedError`.
        """
        if isinstance(tablet_count, bool) or not isinstance(tablet_count, int) \
                or not 1 <= tablet_count <= MAX_TABLET_COUNT:
            raise SchemaError(f"{path}: tablet_count must be an integer from 1 to {MAX_TABLET_COUNT} (YTsaurus' "
                              f"limit), got {tablet_count!r}")
        require_kind(self, path, ORDERED)
        self.check_removable(path, tablet_count)
        self._reshard(path, tablet_count)

    def check_removable(self, path: str, tablet_count: int) -> None:
        """`UntrimmedTabletsError` if resharding `path` to `tablet_count` tablets would remove a tablet that still
        holds rows."""
        untrimmed = {t.tablet_index: (t.trimmed_row_count, t.total_row_count) for t in self.get_tablet_infos(path)
                     if t.tablet_index >= tablet_count and t.trimmed_row_count < t.total_row_count}
        if untrimmed:
            raise UntrimmedTabletsError.of(path, tablet_count, untrimmed)

    @abc.abstractmethod
    def _reshard(self, path: str, tablet_count: int) -> None:
        """The backend's reshard of an ordered table (see `reshard`), atomic: all of it happens or none."""

    # -- consumers --------------------------------------------------------------------------------

    @abc.abstractmethod
    def create_consumer(self, path: str, *, recursive: bool = False, ignore_existing: bool = False) -> None:
        """Create a consumer table (sorted, YT consumer schema, `treat_as_queue_consumer`)."""

    @abc.abstractmethod
    def register_queue_consumer(
        self, queue_path: str, consumer_path: str, *, vital: bool = False,
        partitions: Sequence[int] | None = None,
    ) -> None: ...

    @abc.abstractmethod
    def unregister_queue_consumer(self, queue_path: str, consumer_path: str) -> None: ...

    @abc.abstractmethod
    def list_queue_consumer_registrations(
        self, queue_path: str | None = None, consumer_path: str | None = None,
    ) -> list[Registration]: ...

    @abc.abstractmethod
    def get_consumer_offsets(self, consumer_path: str, queue_path: str) -> dict[int, int]:
        """Committed offset (next row to read) per partition; partitions never advanced are absent."""

    @abc.abstractmethod
    def pull_consumer(
        self, consumer_path: str, queue_path: str, offset: int | None, partition_index: int, *,
        max_row_count: int = PULL_ROWS, max_data_weight: int = READ_BATCH_BYTES,
    ) -> pa.Table:
        """Rows of one partition from `offset` (or the consumer's committed offset when None), with
        `$tablet_index` and `$row_index` columns. Raises `NotRegisteredError` if not registered."""

    @abc.abstractmethod
    def advance_consumer(
        self, consumer_path: str, queue_path: str, partition_index: int, old_offset: int | None,
        new_offset: int,
    ) -> None:
        """Set the consumer's offset for a partition. With `old_offset` not None, fails with
        `ConflictError` unless the stored offset equals it (compare-and-set)."""

    # -- queue producers ---------------------------------------------------------------------------
    # YTsaurus 24.1+ (`ytsaurus-client` 0.13.21+): exactly-once writes into a queue. A session (producer, queue,
    # session id) keeps the last sequence number written and an epoch; see `yt/yt/tests/integration/queues/
    # test_producer.py` for the semantics both backends follow.

    def require_queue_producers(self) -> None:  # noqa: B027 - every backend but an old YTsaurus serves them
        """Raise `ClusterError` naming `QUEUE_PRODUCERS_SINCE` when this cluster does not serve queue producers."""

    @abc.abstractmethod
    def create_queue_producer(self, path: str, *, recursive: bool = False, ignore_existing: bool = False) -> None:
        """Create a producer table (sorted, `PRODUCER_SCHEMA`, `treat_as_queue_producer`)."""

    @abc.abstractmethod
    def create_queue_producer_session(
        self, producer_path: str, queue_path: str, session_id: str, user_meta: Any = None,
    ) -> ProducerSession:
        """Create the session (epoch 0, sequence number -1) or, when it exists, bump its epoch (fencing off every
        writer of the older one); `user_meta`, when given, replaces the stored one. Returns the recovery point."""

    @abc.abstractmethod
    def remove_queue_producer_session(self, producer_path: str, queue_path: str, session_id: str) -> None:
        """Forget the session; creating it again starts at epoch 0 and sequence number -1."""

    @abc.abstractmethod
    def push_queue_producer(
        self, producer_path: str, queue_path: str, session_id: str, epoch: int, rows: ROWS, *,
        sequence_number: int | None = None, user_meta: Any = None,
    ) -> PushResult:
        """Append rows to the queue (to a `$tablet_index` column's tablets, or spread) through the session.

        Each row's sequence number is its `$sequence_number` column, or `sequence_number` plus its position (one of
        the two, never both); they must be non-negative and strictly increasing (`SequenceNumberError`). Rows at or
        below the session's stored number are skipped (written before); the rest are appended and the session
        moves to the last number, with `user_meta` when given. An epoch older than the session's raises
        `ZombieEpochError`, a newer one `InvalidEpochError`; a session never created `NoSuchProducerSessionError`.
        All of it or none is written: a push is one tablet transaction (its own, or the caller's), so it takes at
        most `max_rows_per_tablet_transaction` rows per tablet; more rows go in several pushes, which the sequence
        numbers make safe to replay."""

    # -- sorted and static tables, documents --------------------------------------------------------

    @abc.abstractmethod
    def delete_rows(self, path: str, keys: Iterable[Mapping[str, Any]]) -> None: ...

    @abc.abstractmethod
    def lookup_rows(self, path: str, keys: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]: ...

    @abc.abstractmethod
    def select_rows(self, path: str) -> list[dict[str, Any]]:
        """All rows of a sorted table in key order (small tables: offsets, markers, tests)."""

    @abc.abstractmethod
    def write_table(self, path: str, rows: ROWS, *, append: bool = False) -> None:
        """Write a static table whole (or append to it)."""

    @abc.abstractmethod
    def read_table(self, path: str, *, max_rows: int = READ_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
        """Read a static table or a whole sorted table as Arrow batches."""

    # -- transactions -----------------------------------------------------------------------------

    @abc.abstractmethod
    def transaction(self) -> Transaction:
        """Start a tablet transaction covering rows in several tables and consumer advances."""

    def close(self) -> None:  # noqa: B027 - optional hook for implementations with connections
        """Release connections. The object must not be used afterwards."""

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def table_kind(attrs: Mapping[str, Any]) -> str | None:
    """ORDERED / SORTED / STATIC for a table's attributes, None for other nodes."""
    if attrs.get("type") != TABLE:
        return None
    if not attrs.get("dynamic"):
        return STATIC
    schema = attrs.get("schema") or []
    return SORTED if any(c.get("sort_order") for c in schema) else ORDERED


def require_kind(cluster: Cluster, path: str, *kinds: str) -> NodeInfo:
    """The node's info, or `SchemaError` naming the path and the table kinds expected."""
    info = cluster.node_info(path)
    if info.kind not in kinds:
        raise SchemaError(f"{path}: expected {' or '.join(kinds)} table, found {info.kind or info.type}")
    return info
