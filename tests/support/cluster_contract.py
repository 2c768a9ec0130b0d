"""The cluster contract: one suite that every backend of `streaming_core.cluster` must pass.

`ClusterContract` has no `Test` prefix, so pytest collects it only through a backend's subclass
(`tests/test_cluster_embedded.py`, `tests/test_cluster_ytsaurus.py`). A subclass supplies two fixtures:
`cluster` (an open `Cluster`) and `root` (a fresh `//...` path that does not exist yet; each test creates
everything it needs below it). The tests read only the public interface of `base.py`, so a failure here
is a backend breaking the contract that `streaming_core` and `opsd` rely on.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pyarrow as pa
import pytest

from streaming_core.cluster import (
    AlreadyExistsError,
    Cluster,
    ClusterError,
    ConflictError,
    InvalidUriError,
    NoSuchPathError,
    NotRegisteredError,
    SchemaError,
    TabletInfo,
    TrimmedRowsError,
    UntrimmedTabletsError,
    VitalConsumerError,
    connect,
)
from streaming_core.cluster.base import ORDERED, SORTED, STATIC
from tests.support.wait import registered_and_seen

DATA_SCHEMA = [{"name": "data", "type": "string", "required": True}]
NUMBERED_SCHEMA = [{"name": "n", "type": "int64", "required": True}, {"name": "data", "type": "string"}]
KV_SCHEMA = [
    {"name": "key", "type": "string", "required": True, "sort_order": "ascending"},
    {"name": "value", "type": "int64"},
]
UTC = dt.UTC

#: One column of each composite (and logical) type_v3 kind the connector must carry unchanged.
COMPOSITE_SCHEMA = [
    {"name": "id", "type_v3": "int64"},
    {"name": "tags", "type_v3": {"type_name": "list", "item": "string"}},
    {"name": "point", "type_v3": {"type_name": "struct", "members": [
        {"name": "x", "type": "double"}, {"name": "y", "type": {"type_name": "optional", "item": "int32"}}]}},
    {"name": "counts", "type_v3": {"type_name": "dict", "key": "string", "value": "int64"}},
    {"name": "note", "type_v3": {"type_name": "optional", "item": "utf8"}},
    {"name": "pair", "type_v3": {"type_name": "tuple", "elements": [{"type": "int64"}, {"type": "string"}]}},
    {"name": "amount", "type_v3": {"type_name": "decimal", "precision": 10, "scale": 2}},
    {"name": "day", "type_v3": "date"},
    {"name": "at", "type_v3": "timestamp"},
]


def composite_row(i: int) -> dict[str, Any]:
    return {
        "id": i, "tags": [f"t{i}", "x"], "point": {"x": i / 2, "y": None if i % 2 else i},
        "counts": {"a": i}, "note": None if i % 3 else f"note {i}", "pair": {"_1": i, "_2": str(i)},
        "amount": decimal.Decimal(f"{i}.25"), "day": dt.date(2024, 1, 1) + dt.timedelta(days=i),
        "at": dt.datetime(2024, 1, 1, 12, 0, i % 60, tzinfo=UTC),
    }


def data_rows(count: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"n": i, "data": f"row-{i}"} for i in range(start, start + count)]


def read_all(cluster: Cluster, path: str, tablet: int, **kwargs: Any) -> list[dict[str, Any]]:
    """Every live row of a tablet, read through `read_tablet`."""
    info = cluster.get_tablet_infos(path)[tablet]
    batches = cluster.read_tablet(path, tablet, info.trimmed_row_count, info.total_row_count, **kwargs)
    return [row for batch in batches for row in batch.to_pylist()]


def total_rows(cluster: Cluster, path: str) -> int:
    return sum(t.total_row_count for t in cluster.get_tablet_infos(path))


class ClusterContract:
    """The behaviour every backend shares; see the module docstring."""

    # -- helpers ------------------------------------------------------------------------------------

    @pytest.fixture
    def queue(self, cluster: Cluster, root: str) -> str:
        """A two-tablet queue with an `n` (int64) and a `data` (string) column."""
        return self.make_queue(cluster, f"{root}/queue", NUMBERED_SCHEMA, tablets=2)

    @pytest.fixture
    def consumer(self, cluster: Cluster, root: str, queue: str) -> str:
        """A consumer registered for `queue`."""
        path = f"{root}/consumer"
        cluster.create_consumer(path, recursive=True)
        cluster.register_queue_consumer(queue, path)
        return path

    @staticmethod
    def make_queue(cluster: Cluster, path: str, schema: list[dict[str, Any]], tablets: int = 1) -> str:
        cluster.create("table", path, recursive=True,
                       attributes={"dynamic": True, "schema": schema, "tablet_count": tablets})
        return path

    @staticmethod
    def make_table(cluster: Cluster, path: str, schema: list[dict[str, Any]], *, dynamic: bool) -> str:
        cluster.create("table", path, recursive=True, attributes={"dynamic": dynamic, "schema": schema})
        return path

    # -- path tree ----------------------------------------------------------------------------------

    def test_create_without_recursive_needs_the_parent(self, cluster: Cluster, root: str) -> None:
        with pytest.raises(NoSuchPathError, match=root):
            cluster.create("map_node", f"{root}/a/b")
        assert not cluster.exists(root)

    def test_create_recursive_makes_missing_parents(self, cluster: Cluster, root: str) -> None:
        cluster.create("map_node", f"{root}/a/b", recursive=True)
        assert cluster.exists(f"{root}/a") and cluster.exists(f"{root}/a/b")
        assert cluster.get(f"{root}/a/@type") == "map_node"

    def test_create_existing_node_raises_unless_ignore_existing(self, cluster: Cluster, root: str) -> None:
        cluster.create("map_node", root, recursive=True)
        with pytest.raises(AlreadyExistsError, match=root):
            cluster.create("map_node", root)
        cluster.create("map_node", root, ignore_existing=True)
        assert cluster.exists(root)

    def test_list_returns_sorted_direct_children(self, cluster: Cluster, root: str) -> None:
        for name in ("b", "a", "c/deep"):
            cluster.create("map_node", f"{root}/{name}", recursive=True)
        assert cluster.list(root) == ["a", "b", "c"]

    def test_list_of_unknown_path_raises_no_such_path(self, cluster: Cluster, root: str) -> None:
        with pytest.raises(NoSuchPathError, match=root):
            cluster.list(root)

    def test_attributes_can_be_set_and_read_back(self, cluster: Cluster, root: str) -> None:
        cluster.create("map_node", root, recursive=True, attributes={"owner": "team"})
        cluster.set(f"{root}/@settings", {"limit": 5, "names": ["a"]})
        assert cluster.get(f"{root}/@owner") == "team"
        assert cluster.get(f"{root}/@settings") == {"limit": 5, "names": ["a"]}
        attrs = cluster.get(f"{root}/@")
        assert attrs["type"] == "map_node" and attrs["owner"] == "team"
        assert cluster.exists(f"{root}/@owner") and not cluster.exists(f"{root}/@missing")

    def test_unknown_attribute_raises_no_such_path(self, cluster: Cluster, root: str) -> None:
        cluster.create("map_node", root, recursive=True)
        with pytest.raises(NoSuchPathError, match="missing"):
            cluster.get(f"{root}/@missing")

    def test_remove_of_non_empty_node_needs_recursive(self, cluster: Cluster, root: str) -> None:
        self.make_queue(cluster, f"{root}/sub/queue", DATA_SCHEMA)
        with pytest.raises(ClusterError, match=root):
            cluster.remove(root)
        cluster.remove(root, recursive=True)
        assert not cluster.exists(root) and not cluster.exists(f"{root}/sub/queue")

    def test_remove_of_unknown_path_raises_unless_force(self, cluster: Cluster, root: str) -> None:
        with pytest.raises(NoSuchPathError, match=root):
            cluster.remove(root)
        cluster.remove(root, force=True)

    def test_recreated_queue_starts_empty(self, cluster: Cluster, root: str) -> None:
        path = self.make_queue(cluster, f"{root}/queue", DATA_SCHEMA)
        cluster.insert_rows(path, [{"data": "old"}])
        cluster.remove(path)
        self.make_queue(cluster, path, DATA_SCHEMA)
        assert cluster.get_tablet_infos(path) == [TabletInfo(0, 0, 0)]

    def test_path_not_starting_with_double_slash_is_rejected(self, cluster: Cluster) -> None:
        with pytest.raises(ClusterError, match="home/x"):
            cluster.create("map_node", "home/x")

    # -- ordered tables -----------------------------------------------------------------------------

    def test_ordered_table_has_its_tablets_and_schema(self, cluster: Cluster, root: str) -> None:
        path = self.make_queue(cluster, f"{root}/queue", NUMBERED_SCHEMA, tablets=3)
        assert cluster.node_info(path).kind == ORDERED
        assert cluster.get_tablet_infos(path) == [TabletInfo(i, 0, 0) for i in range(3)]
        assert cluster.get_schema(path).names == ["n", "data"]
        assert cluster.get(f"{path}/@tablet_count") == 3

    def test_composite_types_round_trip_through_insert_and_read(self, cluster: Cluster, root: str) -> None:
        path = self.make_queue(cluster, f"{root}/queue", COMPOSITE_SCHEMA)
        rows = [composite_row(i) for i in range(7)]
        cluster.insert_rows(path, rows)
        read = read_all(cluster, path, 0)
        # Arrow gives a dict column back as (key, value) pairs, as YSON does.
        assert read == [{**r, "counts": list(r["counts"].items())} for r in rows]

    def test_insert_to_a_given_tablet(self, cluster: Cluster, queue: str) -> None:
        cluster.insert_rows(queue, data_rows(5), tablet_index=1)
        assert [t.total_row_count for t in cluster.get_tablet_infos(queue)] == [0, 5]

    def test_insert_routes_rows_by_the_tablet_index_column(self, cluster: Cluster, queue: str) -> None:
        rows = [{"$tablet_index": i % 2, **r} for i, r in enumerate(data_rows(6))]
        cluster.insert_rows(queue, rows)
        assert [r["n"] for r in read_all(cluster, queue, 0)] == [0, 2, 4]
        assert [r["n"] for r in read_all(cluster, queue, 1)] == [1, 3, 5]

    def test_insert_without_a_tablet_spreads_rows_evenly(self, cluster: Cluster, queue: str) -> None:
        cluster.insert_rows(queue, data_rows(100))
        assert [t.total_row_count for t in cluster.get_tablet_infos(queue)] == [50, 50]
        assert sorted(r["n"] for t in (0, 1) for r in read_all(cluster, queue, t)) == list(range(100))

    def test_insert_accepts_arrow_tables_and_batches(self, cluster: Cluster, queue: str) -> None:
        table = pa.table({"n": pa.array(range(4), pa.int64()), "data": [f"row-{i}" for i in range(4)]})
        cluster.insert_rows(queue, table, tablet_index=0)
        cluster.insert_rows(queue, table.to_batches()[0], tablet_index=0)
        assert [r["n"] for r in read_all(cluster, queue, 0)] == [0, 1, 2, 3, 0, 1, 2, 3]

    def test_appends_continue_the_row_index(self, cluster: Cluster, queue: str) -> None:
        for start in (0, 10, 20):
            cluster.insert_rows(queue, data_rows(10, start), tablet_index=0)
        rows = read_all(cluster, queue, 0, service_columns=True)
        assert [r["$row_index"] for r in rows] == list(range(30))
        assert [r["n"] for r in rows] == list(range(30))

    def test_read_tablet_gives_bounded_batches_in_row_index_order(self, cluster: Cluster, queue: str) -> None:
        for start in range(0, 1000, 100):
            cluster.insert_rows(queue, data_rows(100, start), tablet_index=0)
        batches = list(cluster.read_tablet(queue, 0, 130, 870, max_rows=64, service_columns=True))
        assert all(b.num_rows <= 64 for b in batches)
        rows = [r for b in batches for r in b.to_pylist()]
        assert [r["$row_index"] for r in rows] == list(range(130, 870))
        assert [r["n"] for r in rows] == list(range(130, 870))

    def test_read_tablet_respects_max_bytes(self, cluster: Cluster, root: str) -> None:
        path = self.make_queue(cluster, f"{root}/queue", DATA_SCHEMA)
        cluster.insert_rows(path, [{"data": "x" * 100} for _ in range(1000)])
        batches = list(cluster.read_tablet(path, 0, 0, 1000, max_bytes=10_000))
        assert sum(b.num_rows for b in batches) == 1000
        assert len(batches) >= 8
        assert all(b.nbytes <= 2 * 10_000 for b in batches)

    def test_read_tablet_service_columns_come_first(self, cluster: Cluster, queue: str) -> None:
        cluster.insert_rows(queue, data_rows(3), tablet_index=1)
        (batch,) = cluster.read_tablet(queue, 1, 1, 3, service_columns=True)
        assert batch.schema.names[:2] == ["$tablet_index", "$row_index"]
        assert batch.to_pylist() == [
            {"$tablet_index": 1, "$row_index": 1, "n": 1, "data": "row-1"},
            {"$tablet_index": 1, "$row_index": 2, "n": 2, "data": "row-2"},
        ]

    def test_read_tablet_selects_columns(self, cluster: Cluster, queue: str) -> None:
        cluster.insert_rows(queue, data_rows(2), tablet_index=0)
        (batch,) = cluster.read_tablet(queue, 0, 0, 2, columns=["data"])
        assert batch.to_pylist() == [{"data": "row-0"}, {"data": "row-1"}]

    def test_read_tablet_of_an_empty_range_gives_no_rows(self, cluster: Cluster, queue: str) -> None:
        cluster.insert_rows(queue, data_rows(2), tablet_index=0)
        assert sum(b.num_rows for b in cluster.read_tablet(queue, 0, 2, 2)) == 0

    def test_timestamp_column_is_filled_on_append(self, cluster: Cluster, root: str) -> None:
        schema = [{"name": "$timestamp", "type": "uint64"}, *DATA_SCHEMA]
        path = self.make_queue(cluster, f"{root}/queue", schema)
        cluster.insert_rows(path, [{"data": "a"}, {"data": "b"}])
        stamps = [r["$timestamp"] for r in read_all(cluster, path, 0)]
        assert all(isinstance(s, int) and s > 0 for s in stamps)

    def test_cumulative_data_weight_is_the_running_data_weight_of_each_tablet(self, cluster: Cluster,
                                                                             root: str) -> None:
        schema = [*NUMBERED_SCHEMA, {"name": "$cumulative_data_weight", "type": "int64"}]
        path = self.make_queue(cluster, f"{root}/queue", schema, tablets=2)
        cluster.insert_rows(path, [{"n": 0, "data": "ab"}, {"n": 1, "data": None}], tablet_index=0)
        cluster.insert_rows(path, [{"n": 2, "data": "x" * 1000}], tablet_index=1)
        cluster.insert_rows(path, [{"n": 3, "data": "abcd", "$cumulative_data_weight": 7}], tablet_index=0)
        # YTsaurus' data weight: 1 per row + 8 per integer (n and the column itself) + a string's length; null 0
        assert [r["$cumulative_data_weight"] for r in read_all(cluster, path, 0)] == [19, 19 + 17, 36 + 21]
        assert [r["$cumulative_data_weight"] for r in read_all(cluster, path, 1)] == [1017]

    def test_read_rows_at_picks_single_rows_and_leaves_out_trimmed_and_unwritten_ones(self, cluster: Cluster,
                                                                                        queue: str) -> None:
        cluster.insert_rows(queue, data_rows(40), tablet_index=1)
        cluster.trim_rows(queue, 1, 5)
        picked = cluster.read_rows_at(queue, 1, [39, 2, 17, 5, 40, 17])
        assert picked.column_names == ["$row_index", "n", "data"]
        assert picked.to_pylist() == [{"$row_index": r, "n": r, "data": f"row-{r}"} for r in (5, 17, 39)]
        only = cluster.read_rows_at(queue, 1, [6], columns=["data"])
        assert only.to_pylist() == [{"$row_index": 6, "data": "row-6"}]
        assert cluster.read_rows_at(queue, 0, [0, 1]).num_rows == 0

    def test_trim_drops_the_head_and_counts_it(self, cluster: Cluster, queue: str) -> None:
        cluster.insert_rows(queue, data_rows(10), tablet_index=0)
        cluster.trim_rows(queue, 0, 4)
        assert cluster.get_tablet_infos(queue)[0] == TabletInfo(0, 10, 4)
        assert [r["n"] for r in read_all(cluster, queue, 0)] == list(range(4, 10))

    def test_trim_never_goes_backwards(self, cluster: Cluster, queue: str) -> None:
        cluster.insert_rows(queue, data_rows(10), tablet_index=0)
        cluster.trim_rows(queue, 0, 6)
        cluster.trim_rows(queue, 0, 2)
        assert cluster.get_tablet_infos(queue)[0].trimmed_row_count == 6

    def test_trim_past_a_vital_consumer_is_refused_and_trims_nothing(self, cluster: Cluster, queue: str,
                                                                      root: str) -> None:
        vital = f"{root}/vital"
        cluster.create_consumer(vital, recursive=True)
        registered_and_seen(cluster, queue, vital, vital=True)
        cluster.insert_rows(queue, data_rows(10), tablet_index=0)
        cluster.advance_consumer(vital, queue, 0, None, 3)

        with pytest.raises(VitalConsumerError) as err:
            cluster.trim_rows(queue, 0, 5)
        assert vital in str(err.value) and "[3, 5)" in str(err.value) and "--past-vital-consumers" in str(err.value)
        assert cluster.get_tablet_infos(queue)[0].trimmed_row_count == 0
        cluster.trim_rows(queue, 0, 3)
        cluster.trim_rows(queue, 0, 5, past_vital_consumers=True)
        assert cluster.get_tablet_infos(queue)[0].trimmed_row_count == 5

    def test_a_consumer_that_is_not_vital_does_not_hold_the_trim(self, cluster: Cluster, queue: str,
                                                                  consumer: str) -> None:
        cluster.insert_rows(queue, data_rows(10), tablet_index=0)
        cluster.trim_rows(queue, 0, 8)
        assert cluster.get_tablet_infos(queue)[0].trimmed_row_count == 8

    def test_reading_trimmed_rows_names_queue_partition_and_range(self, cluster: Cluster, queue: str) -> None:
        cluster.insert_rows(queue, data_rows(10), tablet_index=1)
        cluster.trim_rows(queue, 1, 5)
        with pytest.raises(TrimmedRowsError) as err:
            list(cluster.read_tablet(queue, 1, 2, 8))
        message = str(err.value)
        assert queue in message and "partition 1" in message and "[2, 5)" in message

    def test_a_kept_read_skips_the_rows_trimmed_before_and_while_it_reads(self, cluster: Cluster, queue: str) -> None:
        cluster.insert_rows(queue, data_rows(10), tablet_index=1)
        cluster.trim_rows(queue, 1, 4)
        assert [r["n"] for b in cluster.read_kept(queue, 1, 0, 10) for r in b.to_pylist()] == list(range(4, 10))
        assert list(cluster.read_kept(queue, 1, 2, 4)) == []
        reading = cluster.read_kept(queue, 1, 4, 10, max_rows=2)
        assert next(reading).column("n").to_pylist() == [4, 5]
        cluster.trim_rows(queue, 1, 8)  # a Queue Agent trims between two calls of the read
        rest = [n for b in reading for n in b.column("n").to_pylist()]
        assert rest == sorted(set(rest)) and {8, 9} <= set(rest) <= set(range(6, 10)), rest

    def test_reading_past_the_end_is_rejected(self, cluster: Cluster, queue: str) -> None:
        cluster.insert_rows(queue, data_rows(3), tablet_index=0)
        with pytest.raises(ClusterError, match=queue):
            list(cluster.read_tablet(queue, 0, 0, 4))

    def test_unknown_tablet_is_rejected(self, cluster: Cluster, queue: str) -> None:
        with pytest.raises(ClusterError, match="tablet 5"):
            cluster.insert_rows(queue, data_rows(1), tablet_index=5)
        with pytest.raises(ClusterError, match="tablet 7"):
            list(cluster.read_tablet(queue, 7, 0, 0))

    # -- resharding (YTsaurus' reshard_table of an ordered table) ------------------------------------

    def test_more_tablets_keep_the_old_rows_indexes_and_trim_and_start_empty(self, cluster: Cluster,
                                                                              queue: str) -> None:
        cluster.insert_rows(queue, data_rows(3), tablet_index=0)
        cluster.insert_rows(queue, data_rows(2, start=3), tablet_index=1)
        cluster.trim_rows(queue, 0, 1)

        cluster.reshard(queue, 4)
        cluster.insert_rows(queue, data_rows(1, start=10), tablet_index=0)
        cluster.insert_rows(queue, data_rows(2, start=20), tablet_index=3)

        assert cluster.get(queue + "/@tablet_count") == 4
        assert cluster.get_tablet_infos(queue) == [TabletInfo(0, 4, 1), TabletInfo(1, 2, 0), TabletInfo(2, 0, 0),
                                                   TabletInfo(3, 2, 0)]
        assert [(r["$row_index"], r["n"]) for r in read_all(cluster, queue, 0, service_columns=True)] == [
            (1, 1), (2, 2), (3, 10)]
        assert [(r["$tablet_index"], r["$row_index"], r["n"]) for r in read_all(
            cluster, queue, 3, service_columns=True)] == [(3, 0, 20), (3, 1, 21)]

    def test_added_tablets_are_partitions_of_the_consumer(self, cluster: Cluster, queue: str,
                                                           consumer: str) -> None:
        cluster.insert_rows(queue, data_rows(2), tablet_index=1)
        cluster.advance_consumer(consumer, queue, 1, None, 1)
        cluster.reshard(queue, 3)
        cluster.insert_rows(queue, data_rows(3, start=5), tablet_index=2)

        cluster.advance_consumer(consumer, queue, 2, 0, 2)

        assert cluster.get_consumer_offsets(consumer, queue) == {1: 1, 2: 2}
        assert cluster.pull_consumer(consumer, queue, None, 2).column("n").to_pylist() == [7]

    def test_fewer_tablets_remove_only_fully_trimmed_ones_and_a_new_one_starts_empty(self, cluster: Cluster,
                                                                                     queue: str) -> None:
        cluster.reshard(queue, 4)
        cluster.insert_rows(queue, data_rows(5), tablet_index=3)

        with pytest.raises(UntrimmedTabletsError) as err:
            cluster.reshard(queue, 2)
        assert queue in str(err.value) and "tablet 3 rows [0, 5)" in str(err.value)
        assert f"opsd queue trim {queue} --partition 3 --count 5" in str(err.value)
        assert [t.total_row_count for t in cluster.get_tablet_infos(queue)] == [0, 0, 0, 5]

        cluster.trim_rows(queue, 3, 5)
        cluster.reshard(queue, 3)
        assert [t.tablet_index for t in cluster.get_tablet_infos(queue)] == [0, 1, 2]
        cluster.reshard(queue, 4)
        assert cluster.get_tablet_infos(queue)[3] == TabletInfo(3, 0, 0)
        cluster.insert_rows(queue, data_rows(1), tablet_index=3)  # the table is writable after every reshard

    def test_reshard_takes_a_queue_and_a_tablet_count_within_the_limit(self, cluster: Cluster, root: str,
                                                                       queue: str) -> None:
        for count in (0, 10_001, True):
            with pytest.raises(SchemaError, match="tablet_count must be an integer from 1 to 10000"):
                cluster.reshard(queue, count)
        table = self.make_table(cluster, f"{root}/sorted", KV_SCHEMA, dynamic=True)
        with pytest.raises(SchemaError, match=f"{table}: expected ordered_dynamic"):
            cluster.reshard(table, 2)
        assert len(cluster.get_tablet_infos(queue)) == 2

    # -- consumers ----------------------------------------------------------------------------------

    def test_consumer_has_the_yt_consumer_schema(self, cluster: Cluster, root: str) -> None:
        path = f"{root}/consumer"
        cluster.create_consumer(path, recursive=True)
        assert cluster.node_info(path).kind == SORTED
        assert cluster.get(f"{path}/@treat_as_queue_consumer") is True
        schema = cluster.get_schema(path)
        assert schema.names == ["queue_cluster", "queue_path", "partition_index", "offset", "meta"]
        assert schema.key_columns == ["queue_cluster", "queue_path", "partition_index"]

    def test_create_consumer_twice_needs_ignore_existing(self, cluster: Cluster, consumer: str) -> None:
        with pytest.raises(AlreadyExistsError, match=consumer):
            cluster.create_consumer(consumer)
        cluster.create_consumer(consumer, ignore_existing=True)

    def test_registrations_can_be_listed_and_removed(self, cluster: Cluster, root: str, queue: str) -> None:
        cluster.create_consumer(f"{root}/c1", recursive=True)
        cluster.create_consumer(f"{root}/c2", recursive=True)
        registered_and_seen(cluster, queue, f"{root}/c1", vital=True, partitions=[1])
        registered_and_seen(cluster, queue, f"{root}/c2")
        regs = cluster.list_queue_consumer_registrations(queue_path=queue)
        assert [(r.consumer_path, r.vital, r.partitions) for r in regs] == [
            (f"{root}/c1", True, (1,)), (f"{root}/c2", False, None)]
        assert [r.queue_path for r in cluster.list_queue_consumer_registrations(consumer_path=f"{root}/c2")] == [
            queue]
        cluster.unregister_queue_consumer(queue, f"{root}/c1")
        assert [r.consumer_path for r in cluster.list_queue_consumer_registrations(queue_path=queue)] == [
            f"{root}/c2"]

    def test_unregistering_a_consumer_not_registered_is_a_no_op(self, cluster: Cluster, root: str, queue: str) -> None:
        """As YTsaurus' `unregister_queue_consumer` (`client_impl.cpp`): the registration is removed if there."""
        cluster.create_consumer(f"{root}/c", recursive=True)
        cluster.unregister_queue_consumer(queue, f"{root}/c")
        assert cluster.list_queue_consumer_registrations(queue_path=queue) == []

    def test_registering_needs_a_queue_and_a_consumer(self, cluster: Cluster, root: str, queue: str) -> None:
        sorted_table = self.make_table(cluster, f"{root}/kv", KV_SCHEMA, dynamic=True)
        with pytest.raises(SchemaError, match=sorted_table):
            cluster.register_queue_consumer(queue, sorted_table)
        with pytest.raises(SchemaError, match=sorted_table):
            cluster.register_queue_consumer(sorted_table, sorted_table)

    def test_pull_consumer_needs_a_registration(self, cluster: Cluster, root: str, queue: str) -> None:
        cluster.create_consumer(f"{root}/c", recursive=True)
        with pytest.raises(NotRegisteredError, match=queue):
            cluster.pull_consumer(f"{root}/c", queue, 0, 0)

    def test_reading_a_range_through_a_consumer_gives_the_same_rows_in_bounded_calls(
            self, cluster: Cluster, queue: str, consumer: str) -> None:
        cluster.insert_rows(queue, data_rows(25), tablet_index=1)
        through = list(cluster.read_tablet(queue, 1, 3, 23, max_rows=7, service_columns=True, consumer_path=consumer))
        direct = list(cluster.read_tablet(queue, 1, 3, 23, max_rows=7, service_columns=True))
        assert [b.num_rows <= 7 for b in through] == [True] * len(through)
        assert [r for b in through for r in b.to_pylist()] == [r for b in direct for r in b.to_pylist()]
        assert [r["n"] for b in through for r in b.to_pylist()] == list(range(3, 23))

    def test_reading_through_a_consumer_needs_its_registration_and_sees_trimmed_rows(
            self, cluster: Cluster, root: str, queue: str, consumer: str) -> None:
        cluster.insert_rows(queue, data_rows(10), tablet_index=0)
        cluster.create_consumer(f"{root}/other", recursive=True)
        with pytest.raises(NotRegisteredError, match=queue):
            list(cluster.read_tablet(queue, 0, 0, 10, consumer_path=f"{root}/other"))
        cluster.trim_rows(queue, 0, 4, past_vital_consumers=True)
        with pytest.raises(TrimmedRowsError, match=r"rows \[1, 4\)"):
            list(cluster.read_tablet(queue, 0, 1, 10, consumer_path=consumer))

    def test_pull_consumer_reads_from_the_committed_offset(self, cluster: Cluster, queue: str,
                                                           consumer: str) -> None:
        cluster.insert_rows(queue, data_rows(20), tablet_index=1)
        cluster.advance_consumer(consumer, queue, 1, None, 5)
        table = cluster.pull_consumer(consumer, queue, None, 1, max_row_count=4)
        assert table.column("$row_index").to_pylist() == [5, 6, 7, 8]
        assert table.column("$tablet_index").to_pylist() == [1] * 4
        assert table.column("n").to_pylist() == [5, 6, 7, 8]

    def test_pull_consumer_from_an_explicit_offset(self, cluster: Cluster, queue: str, consumer: str) -> None:
        cluster.insert_rows(queue, data_rows(10), tablet_index=0)
        assert cluster.pull_consumer(consumer, queue, 8, 0).column("n").to_pylist() == [8, 9]

    def test_pull_consumer_at_or_past_the_end_gives_no_rows(self, cluster: Cluster, queue: str,
                                                            consumer: str) -> None:
        cluster.insert_rows(queue, data_rows(3), tablet_index=0)
        assert cluster.pull_consumer(consumer, queue, 3, 0).num_rows == 0
        assert cluster.pull_consumer(consumer, queue, 10, 0).num_rows == 0

    def test_advance_consumer_moves_offsets_per_partition(self, cluster: Cluster, queue: str,
                                                          consumer: str) -> None:
        assert cluster.get_consumer_offsets(consumer, queue) == {}
        cluster.advance_consumer(consumer, queue, 0, None, 7)
        cluster.advance_consumer(consumer, queue, 1, 0, 3)
        cluster.advance_consumer(consumer, queue, 0, 7, 9)
        assert cluster.get_consumer_offsets(consumer, queue) == {0: 9, 1: 3}
        (row,) = [r for r in cluster.select_rows(consumer) if r["partition_index"] == 0]
        assert (row["queue_cluster"], row["queue_path"], row["offset"]) == (cluster.name, queue, 9)

    def test_advance_with_a_stale_old_offset_raises_conflict(self, cluster: Cluster, queue: str,
                                                             consumer: str) -> None:
        cluster.advance_consumer(consumer, queue, 0, 0, 10)
        with pytest.raises(ConflictError) as err:
            cluster.advance_consumer(consumer, queue, 0, 4, 12)
        assert consumer in str(err.value) and "10" in str(err.value)
        assert cluster.get_consumer_offsets(consumer, queue) == {0: 10}

    def test_advance_needs_a_registration(self, cluster: Cluster, root: str, queue: str) -> None:
        cluster.create_consumer(f"{root}/c", recursive=True)
        with pytest.raises(NotRegisteredError, match=f"{root}/c"):
            cluster.advance_consumer(f"{root}/c", queue, 0, None, 1)

    # -- sorted tables ------------------------------------------------------------------------------

    def test_upsert_replaces_rows_by_key(self, cluster: Cluster, root: str) -> None:
        path = self.make_table(cluster, f"{root}/kv", KV_SCHEMA, dynamic=True)
        assert cluster.node_info(path).kind == SORTED
        cluster.insert_rows(path, [{"key": "a", "value": 1}, {"key": "b", "value": 2}])
        cluster.insert_rows(path, [{"key": "a", "value": 10}])
        assert cluster.lookup_rows(path, [{"key": "a"}, {"key": "zz"}, {"key": "b"}]) == [
            {"key": "a", "value": 10}, {"key": "b", "value": 2}]

    def test_delete_removes_rows_by_key(self, cluster: Cluster, root: str) -> None:
        path = self.make_table(cluster, f"{root}/kv", KV_SCHEMA, dynamic=True)
        cluster.insert_rows(path, [{"key": "a", "value": 1}, {"key": "b", "value": 2}])
        cluster.delete_rows(path, [{"key": "a"}, {"key": "missing"}])
        assert cluster.select_rows(path) == [{"key": "b", "value": 2}]

    def test_select_and_read_table_give_rows_in_key_order(self, cluster: Cluster, root: str) -> None:
        path = self.make_table(cluster, f"{root}/kv", KV_SCHEMA, dynamic=True)
        cluster.insert_rows(path, [{"key": k, "value": i} for i, k in enumerate("dbca")])
        assert [r["key"] for r in cluster.select_rows(path)] == ["a", "b", "c", "d"]
        assert [r["key"] for b in cluster.read_table(path) for r in b.to_pylist()] == ["a", "b", "c", "d"]

    # -- static tables ------------------------------------------------------------------------------

    def test_static_table_write_append_and_read(self, cluster: Cluster, root: str) -> None:
        path = self.make_table(cluster, f"{root}/static", NUMBERED_SCHEMA, dynamic=False)
        assert cluster.node_info(path).kind == STATIC
        cluster.write_table(path, data_rows(3))
        cluster.write_table(path, data_rows(2, 3), append=True)
        assert [r["n"] for b in cluster.read_table(path) for r in b.to_pylist()] == [0, 1, 2, 3, 4]
        cluster.write_table(path, data_rows(1, 7))
        assert [r["n"] for b in cluster.read_table(path) for r in b.to_pylist()] == [7]

    def test_static_table_reads_in_bounded_batches(self, cluster: Cluster, root: str) -> None:
        path = self.make_table(cluster, f"{root}/static", NUMBERED_SCHEMA, dynamic=False)
        cluster.write_table(path, pa.table({"n": pa.array(range(250), pa.int64()), "data": ["x"] * 250}))
        batches = list(cluster.read_table(path, max_rows=100))
        assert [b.num_rows for b in batches] == [100, 100, 50]

    def test_a_sorted_static_table_reads_in_key_order_whatever_the_write_order(self, cluster: Cluster,
                                                                              root: str) -> None:
        schema = [{**NUMBERED_SCHEMA[0], "sort_order": "ascending"}, *NUMBERED_SCHEMA[1:]]
        path = self.make_table(cluster, f"{root}/static", schema, dynamic=False)
        cluster.write_table(path, [{"n": n, "data": "x"} for n in (5, 7)], append=True)
        cluster.write_table(path, [{"n": n, "data": "x"} for n in (1, 6)], append=True)
        assert [r["n"] for b in cluster.read_table(path) for r in b.to_pylist()] == [1, 5, 6, 7]

    def test_move_replaces_a_static_table_in_one_step_only_when_forced(self, cluster: Cluster, root: str) -> None:
        old = self.make_table(cluster, f"{root}/old", NUMBERED_SCHEMA, dynamic=False)
        new = self.make_table(cluster, f"{root}/new", NUMBERED_SCHEMA, dynamic=False)
        cluster.write_table(old, data_rows(3))
        cluster.write_table(new, data_rows(1, 7))
        with pytest.raises(AlreadyExistsError, match=old):
            cluster.move(new, old)
        cluster.move(new, old, force=True)
        assert not cluster.exists(new)
        assert [r["n"] for b in cluster.read_table(old) for r in b.to_pylist()] == [7]

    # -- documents ----------------------------------------------------------------------------------

    def test_document_holds_a_json_value(self, cluster: Cluster, root: str) -> None:
        path = f"{root}/tuning"
        cluster.create("document", path, recursive=True, attributes={"value": {"max_rows": 100}})
        assert cluster.get(path) == {"max_rows": 100}
        cluster.set(path, {"max_rows": 200, "history": [1, 2]})
        assert cluster.get(path) == {"max_rows": 200, "history": [1, 2]}
        assert cluster.get(f"{path}/@type") == "document"

    # -- transactions -------------------------------------------------------------------------------

    def test_commit_makes_all_writes_visible_together(self, cluster: Cluster, root: str, queue: str,
                                                      consumer: str) -> None:
        out = self.make_queue(cluster, f"{root}/out", NUMBERED_SCHEMA)
        kv = self.make_table(cluster, f"{root}/kv", KV_SCHEMA, dynamic=True)
        tx = cluster.transaction()
        tx.insert_rows(out, data_rows(5))
        tx.insert_rows(kv, [{"key": "batch", "value": 1}])
        tx.advance_consumer(consumer, queue, 0, None, 5)
        assert tx.lookup_rows(kv, [{"key": "batch"}]) == [{"key": "batch", "value": 1}]
        assert total_rows(cluster, out) == 0 and cluster.select_rows(kv) == []
        assert cluster.get_consumer_offsets(consumer, queue) == {}
        tx.commit()
        assert total_rows(cluster, out) == 5
        assert cluster.select_rows(kv) == [{"key": "batch", "value": 1}]
        assert cluster.get_consumer_offsets(consumer, queue) == {0: 5}

    def test_abort_leaves_nothing(self, cluster: Cluster, root: str, queue: str, consumer: str) -> None:
        kv = self.make_table(cluster, f"{root}/kv", KV_SCHEMA, dynamic=True)
        tx = cluster.transaction()
        tx.insert_rows(queue, data_rows(5))
        tx.insert_rows(kv, [{"key": "batch", "value": 1}])
        tx.advance_consumer(consumer, queue, 0, None, 5)
        tx.abort()
        assert total_rows(cluster, queue) == 0 and cluster.select_rows(kv) == []
        assert cluster.get_consumer_offsets(consumer, queue) == {}

    def test_exception_inside_with_aborts(self, cluster: Cluster, queue: str, consumer: str) -> None:
        with pytest.raises(RuntimeError, match="boom"), cluster.transaction() as tx:
            tx.insert_rows(queue, data_rows(5))
            tx.advance_consumer(consumer, queue, 0, None, 5)
            raise RuntimeError("boom")
        assert total_rows(cluster, queue) == 0
        assert cluster.get_consumer_offsets(consumer, queue) == {}

    def test_with_block_commits_on_normal_exit(self, cluster: Cluster, queue: str, consumer: str) -> None:
        with cluster.transaction() as tx:
            tx.insert_rows(queue, data_rows(4))
            tx.advance_consumer(consumer, queue, 1, None, 2)
        assert total_rows(cluster, queue) == 4
        assert cluster.get_consumer_offsets(consumer, queue) == {1: 2}

    def test_stale_advance_inside_a_transaction_aborts_it_all(self, cluster: Cluster, queue: str,
                                                              consumer: str) -> None:
        cluster.advance_consumer(consumer, queue, 0, None, 3)
        with pytest.raises(ConflictError), cluster.transaction() as tx:
            tx.insert_rows(queue, data_rows(5))
            tx.advance_consumer(consumer, queue, 0, 1, 8)
        assert total_rows(cluster, queue) == 0
        assert cluster.get_consumer_offsets(consumer, queue) == {0: 3}

    def test_transaction_delete_rows(self, cluster: Cluster, root: str) -> None:
        kv = self.make_table(cluster, f"{root}/kv", KV_SCHEMA, dynamic=True)
        cluster.insert_rows(kv, [{"key": "a", "value": 1}])
        with cluster.transaction() as tx:
            tx.delete_rows(kv, [{"key": "a"}])
            assert tx.lookup_rows(kv, [{"key": "a"}]) == []
        assert cluster.select_rows(kv) == []

    def test_publish_table_adds_a_static_tables_rows_at_commit_only(self, cluster: Cluster, root: str) -> None:
        out = self.make_queue(cluster, f"{root}/out", NUMBERED_SCHEMA, tablets=2)
        kv = self.make_table(cluster, f"{root}/kv", KV_SCHEMA, dynamic=True)
        cluster.insert_rows(kv, [{"key": "a", "value": 1}, {"key": "b", "value": 2}])
        staged = self.make_table(cluster, f"{root}/staged", NUMBERED_SCHEMA, dynamic=False)
        staged_kv = self.make_table(cluster, f"{root}/staged_kv", [{k: v for k, v in c.items() if k != "sort_order"}
                                                                   for c in KV_SCHEMA], dynamic=False)
        cluster.write_table(staged, data_rows(30))
        cluster.write_table(staged, data_rows(20, 30), append=True)
        cluster.write_table(staged_kv, [{"key": "b", "value": 20}, {"key": "c", "value": 3}])
        with cluster.transaction() as tx:
            assert tx.publish_table(staged, out) == 50
            assert tx.publish_table(staged_kv, kv) == 2
            assert total_rows(cluster, out) == 0
        assert sorted(r["n"] for t in (0, 1) for r in read_all(cluster, out, t)) == list(range(50))
        assert cluster.select_rows(kv) == [{"key": "a", "value": 1}, {"key": "b", "value": 20},
                                           {"key": "c", "value": 3}]

    def test_an_aborted_publish_adds_nothing(self, cluster: Cluster, root: str) -> None:
        out = self.make_queue(cluster, f"{root}/out", NUMBERED_SCHEMA)
        staged = self.make_table(cluster, f"{root}/staged", NUMBERED_SCHEMA, dynamic=False)
        cluster.write_table(staged, data_rows(5))
        with pytest.raises(RuntimeError, match="boom"), cluster.transaction() as tx:
            tx.publish_table(staged, out)
            raise RuntimeError("boom")
        assert total_rows(cluster, out) == 0
        assert [r["n"] for b in cluster.read_table(staged) for r in b.to_pylist()] == list(range(5))

    # -- bad input ----------------------------------------------------------------------------------

    def test_unknown_path_is_named(self, cluster: Cluster, root: str) -> None:
        missing = f"{root}/missing"
        for call in (lambda: cluster.insert_rows(missing, data_rows(1)),
                     lambda: cluster.get_tablet_infos(missing),
                     lambda: list(cluster.read_tablet(missing, 0, 0, 1)),
                     lambda: cluster.get(missing),
                     lambda: cluster.select_rows(missing)):
            with pytest.raises(NoSuchPathError, match=missing):
                call()

    def test_wrong_table_kind_is_named(self, cluster: Cluster, root: str, queue: str) -> None:
        static = self.make_table(cluster, f"{root}/static", NUMBERED_SCHEMA, dynamic=False)
        with pytest.raises(SchemaError, match=static):
            cluster.insert_rows(static, data_rows(1))
        with pytest.raises(SchemaError, match=static):
            cluster.get_tablet_infos(static)
        with pytest.raises(SchemaError, match=queue):
            cluster.select_rows(queue)
        with pytest.raises(SchemaError, match=queue):
            cluster.write_table(queue, data_rows(1))

    def test_table_without_schema_is_rejected(self, cluster: Cluster, root: str) -> None:
        with pytest.raises(SchemaError, match="schema"):
            cluster.create("table", f"{root}/t", recursive=True, attributes={"dynamic": True})

    @pytest.mark.parametrize("schema", [NUMBERED_SCHEMA, DATA_SCHEMA], ids=["int-and-string", "string-only"])
    def test_unknown_column_is_rejected_and_nothing_written(self, cluster: Cluster, root: str,
                                                            schema: list[dict[str, Any]]) -> None:
        queue = self.make_queue(cluster, f"{root}/queue", schema)
        rows = [{"data": str(i)} for i in range(10)]
        rows[3]["colour"] = "red"
        with pytest.raises(SchemaError, match=r"row 3 .*colour"):
            cluster.insert_rows(queue, rows)
        with pytest.raises(SchemaError, match="colour"):
            cluster.insert_rows(queue, pa.table({"data": ["a"], "colour": ["red"]}))
        assert total_rows(cluster, queue) == 0

    @pytest.mark.parametrize(("column", "bad_value"), [
        ("n", "seven"), ("n", 7.5), ("n", None), ("data", 12),
    ])
    def test_one_bad_row_in_a_thousand_writes_none_and_is_named(self, cluster: Cluster, queue: str,
                                                                column: str, bad_value: Any) -> None:
        rows = data_rows(1000)
        rows[617][column] = bad_value
        with pytest.raises(SchemaError) as err:
            cluster.insert_rows(queue, rows)
        assert "617" in str(err.value) and repr(column) in str(err.value)
        assert total_rows(cluster, queue) == 0

    @pytest.mark.parametrize(("column", "bad_value"), [
        ("tags", "not a list"), ("point", {"x": 1.0, "z": 2}), ("counts", "a=1"), ("amount", "lots"),
        ("day", "2024-01-01"), ("id", 1.5),
    ])
    def test_wrong_composite_value_is_rejected(self, cluster: Cluster, root: str, column: str,
                                               bad_value: Any) -> None:
        path = self.make_queue(cluster, f"{root}/queue", COMPOSITE_SCHEMA)
        rows = [composite_row(i) for i in range(5)]
        rows[3][column] = bad_value
        with pytest.raises(SchemaError) as err:
            cluster.insert_rows(path, rows)
        assert "row 3" in str(err.value) and repr(column) in str(err.value)
        assert total_rows(cluster, path) == 0

    def test_arrow_column_of_the_wrong_type_is_named(self, cluster: Cluster, queue: str) -> None:
        with pytest.raises(SchemaError, match="'n'"):
            cluster.insert_rows(queue, pa.table({"n": [1.5, 2.0], "data": ["a", "b"]}))
        assert total_rows(cluster, queue) == 0

    @pytest.mark.parametrize("uri", ["foo://x", "local://host/path", "yt://"])
    def test_bad_uri_is_rejected(self, uri: str) -> None:
        with pytest.raises(InvalidUriError, match="cluster URI"):
            connect(uri)
