"""How the embedded cluster stores rows, beyond the contract: sorted tables as runs of Arrow chunks (newest
wins, compaction keeps every answer), a publish that moves staged chunks without writing their bytes again,
and roots of earlier layouts (pickled sorted rows refused by name, never unpickled; inline chunks read)."""

from __future__ import annotations

import contextlib
import os
import pickle
import random
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from streaming_core.cluster import Cluster, TableSchema, connect
from streaming_core.cluster.base import READ_BATCH_ROWS
from streaming_core.cluster.embedded import sorted_store
from streaming_core.cluster.embedded.arrow_chunks import WHOLE_SHARE
from streaming_core.cluster.embedded.sorted_store import LegacyLayoutError
from streaming_core.cluster.embedded.sqlite_store import DB_FILE, STORED_CHUNK_ROWS, encode_batch

#: A two-column key, the second optional: keys with nulls sort first, as in YTsaurus.
PAIR_SCHEMA = [
    {"name": "a", "type": "string", "required": True, "sort_order": "ascending"},
    {"name": "b", "type": "int64", "sort_order": "ascending"},
    {"name": "v", "type": "int64"},
]
ROWS_SCHEMA = [{"name": "n", "type": "int64", "required": True}, {"name": "data", "type": "string"}]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "cluster"


@pytest.fixture
def cluster(root: Path) -> Cluster:
    with connect(f"local://{root}") as c:
        yield c


def sql(root: Path, query: str, *args: Any) -> list[tuple]:
    with contextlib.closing(sqlite3.connect(root / DB_FILE)) as conn:
        return conn.execute(query, args).fetchall()


def expected_rows(model: dict[tuple, int]) -> list[dict[str, Any]]:
    ordered = sorted(model, key=lambda k: (k[0], k[1] is not None, k[1] or 0))
    return [{"a": a, "b": b, "v": model[a, b]} for a, b in ordered]


class TestSortedTables:
    def test_random_upserts_and_deletes_match_a_model_through_compactions(self, cluster, root, monkeypatch):
        monkeypatch.setattr(sorted_store, "MAX_RUNS", 3)  # compact often: partial and whole merges
        path = "//t/kv"
        cluster.create("table", path, recursive=True, attributes={"dynamic": True, "schema": PAIR_SCHEMA})
        rng = random.Random(7)
        keys = [(a, b) for a in "xyz" for b in (None, 0, 1, 2)]
        model: dict[tuple, int] = {}
        for step in range(60):
            chosen = rng.sample(keys, rng.randint(1, 6))
            if rng.random() < 0.3:
                cluster.delete_rows(path, [{"a": a, "b": b} for a, b in chosen])
                for key in chosen:
                    model.pop(key, None)
            else:
                rows = [{"a": a, "b": b, "v": step * 10 + i} for i, (a, b) in enumerate(chosen)]
                cluster.insert_rows(path, rows + rows[:1])  # a repeated key: the last one wins
                model.update({(r["a"], r["b"]): r["v"] for r in rows})
            assert cluster.select_rows(path) == expected_rows(model)
            assert cluster.get(f"{path}/@row_count") == len(model)
            probe = rng.sample(keys, 4)
            assert cluster.lookup_rows(path, [{"a": a, "b": b} for a, b in probe]) == [
                {"a": a, "b": b, "v": model[a, b]} for a, b in probe if (a, b) in model]
        (runs,) = sql(root, "SELECT count(DISTINCT run) FROM sorted_chunks WHERE path=?", path)[0]
        assert runs <= 3

    def test_a_lookup_of_several_keys_returns_exactly_those_keys(self, cluster):
        path = "//t/kv"
        cluster.create("table", path, recursive=True, attributes={"dynamic": True, "schema": PAIR_SCHEMA})
        cluster.insert_rows(path, [{"a": "x", "b": 2, "v": 1}, {"a": "y", "b": 1, "v": 2}])
        assert cluster.lookup_rows(path, [{"a": "x", "b": 1}, {"a": "y", "b": 2}]) == []
        assert cluster.lookup_rows(path, [{"a": "y", "b": 1}, {"a": "x", "b": 2}]) == [
            {"a": "y", "b": 1, "v": 2}, {"a": "x", "b": 2, "v": 1}]

    def test_rows_are_stored_as_arrow_ipc(self, cluster, root):
        path = "//t/kv"
        cluster.create("table", path, recursive=True, attributes={"dynamic": True, "schema": PAIR_SCHEMA})
        cluster.insert_rows(path, [{"a": "x", "b": 1, "v": 1}])
        cluster.delete_rows(path, [{"a": "x", "b": 1}])
        stored = sql(root, "SELECT tombstones, blobs.data FROM sorted_chunks JOIN blobs ON blobs.id = blob "
                           "WHERE path=? ORDER BY run", path)
        assert [(tomb, pa.ipc.open_stream(data).read_all().column_names) for tomb, data in stored] == [
            (0, ["a", "b", "v"]), (1, ["a", "b"])]


class TestPublish:
    def _staged(self, cluster: Cluster, rows: int) -> str:
        cluster.create("table", "//t/staged", recursive=True, attributes={"schema": ROWS_SCHEMA})
        for start in range(0, rows, 100):
            cluster.write_table("//t/staged", pa.table({"n": pa.array(range(start, start + 100), pa.int64()),
                                                        "data": [f"r{start}"] * 100}), append=True)
        return "//t/staged"

    def test_staged_chunks_are_moved_by_reference_and_spread_over_the_tablets(self, cluster, root):
        staged = self._staged(cluster, 400)
        cluster.create("table", "//t/out", attributes={"dynamic": True, "tablet_count": 2, "schema": ROWS_SCHEMA})
        blobs = [b for (b,) in sql(root, "SELECT blob FROM static_chunks WHERE path=? ORDER BY seq", staged)]
        (stored_bytes,) = sql(root, "SELECT sum(length(data)) FROM blobs")[0]

        with cluster.transaction() as tx:
            assert tx.publish_table(staged, "//t/out") == 400

        placed = sql(root, "SELECT tablet, first_row, row_count, blob FROM chunks WHERE path=? "
                           "ORDER BY blob", "//t/out")
        assert placed == [(0, 0, 100, blobs[0]), (1, 0, 100, blobs[1]), (0, 100, 100, blobs[2]),
                          (1, 100, 100, blobs[3])]
        assert sql(root, "SELECT sum(length(data)) FROM blobs")[0] == (stored_bytes,), "no byte written again"
        assert [i.total_row_count for i in cluster.get_tablet_infos("//t/out")] == [200, 200]
        assert cluster.get(f"{staged}/@row_count") == 0
        rows = [r["n"] for t in (0, 1) for b in cluster.read_tablet("//t/out", t, 0, 200) for r in b.to_pylist()]
        assert sorted(rows) == list(range(400))

    def test_a_target_with_a_timestamp_column_gets_its_rows_stamped(self, cluster):
        staged = self._staged(cluster, 100)
        schema = [*ROWS_SCHEMA, {"name": "$timestamp", "type": "uint64"}]
        cluster.create("table", "//t/out", attributes={"dynamic": True, "schema": schema})
        cluster.create("table", "//t/staged_ts", attributes={"schema": schema})
        cluster.write_table("//t/staged_ts", [r for b in cluster.read_table(staged) for r in b.to_pylist()])
        with cluster.transaction() as tx:
            tx.publish_table("//t/staged_ts", "//t/out")
        stamps = [r["$timestamp"] for b in cluster.read_tablet("//t/out", 0, 0, 100) for r in b.to_pylist()]
        assert len(stamps) == 100 and all(stamps)


class TestEarlierLayouts:
    """A root written before sorted tables became Arrow runs and chunks moved to `blobs`."""

    OLD_DDL = """
    CREATE TABLE nodes (path TEXT PRIMARY KEY, type TEXT NOT NULL, attrs TEXT NOT NULL, value TEXT) WITHOUT ROWID;
    CREATE TABLE tablets (path TEXT NOT NULL, tablet INTEGER NOT NULL, total INTEGER NOT NULL,
        trimmed INTEGER NOT NULL, PRIMARY KEY (path, tablet)) WITHOUT ROWID;
    CREATE TABLE chunks (path TEXT NOT NULL, tablet INTEGER NOT NULL, first_row INTEGER NOT NULL,
        row_count INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (path, tablet, first_row));
    CREATE TABLE sorted_rows (path TEXT NOT NULL, key TEXT NOT NULL, row BLOB NOT NULL,
        PRIMARY KEY (path, key)) WITHOUT ROWID;
    CREATE TABLE static_chunks (path TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL,
        PRIMARY KEY (path, seq));
    CREATE TABLE registrations (queue TEXT NOT NULL, consumer TEXT NOT NULL, vital INTEGER NOT NULL,
        partitions TEXT, PRIMARY KEY (queue, consumer)) WITHOUT ROWID;
    """

    class Trap:
        """Unpickling it creates a file: proof that nothing unpickled the stored row."""

        def __init__(self, marker: str) -> None:
            self.marker = marker

        def __reduce__(self):
            return os.mkdir, (self.marker,)

    @pytest.fixture
    def old_root(self, root: Path) -> Path:
        import json

        root.mkdir(parents=True)
        queue_schema = [{"name": n, "type_v3": t} for n, t in (("n", "int64"), ("data", {"type_name": "optional",
                                                                                           "item": "string"}))]
        kv_schema = [{"name": "key", "type_v3": "string", "sort_order": "ascending"},
                     {"name": "value", "type_v3": {"type_name": "optional", "item": "int64"}}]
        with contextlib.closing(sqlite3.connect(root / DB_FILE)) as conn:
            conn.executescript(self.OLD_DDL)
            for path, attrs in (("//old", {"type": "map_node"}),
                                ("//old/queue", {"type": "table", "dynamic": True, "tablet_count": 1,
                                                 "schema": queue_schema}),
                                ("//old/kv", {"type": "table", "dynamic": True, "schema": kv_schema}),
                                ("//old/static", {"type": "table", "dynamic": False, "schema": queue_schema})):
                conn.execute("INSERT INTO nodes VALUES (?, ?, ?, NULL)", (path, attrs["type"], json.dumps(attrs)))
            rows = pa.table({"n": [0, 1, 2], "data": ["a", "b", "c"]},
                            schema=TableSchema.from_yt(queue_schema).arrow_schema())  # as stored then
            conn.execute("INSERT INTO tablets VALUES ('//old/queue', 0, 3, 0)")
            conn.execute("INSERT INTO chunks VALUES ('//old/queue', 0, 0, 3, ?)", (encode_batch(rows),))
            conn.execute("INSERT INTO static_chunks VALUES ('//old/static', 0, ?)", (encode_batch(rows),))
            conn.execute("INSERT INTO sorted_rows VALUES ('//old/kv', '[\"a\"]', ?)",
                         (pickle.dumps(self.Trap(str(root / "unpickled"))),))
            conn.commit()
        return root

    def test_a_pickled_sorted_table_is_refused_by_name_and_never_unpickled(self, old_root):
        with connect(f"local://{old_root}") as cluster:
            for call in (lambda: cluster.select_rows("//old/kv"),
                         lambda: cluster.lookup_rows("//old/kv", [{"key": "a"}]),
                         lambda: cluster.insert_rows("//old/kv", [{"key": "b", "value": 1}])):
                with pytest.raises(LegacyLayoutError, match=r"//old/kv: .*earlier versions.*remove the table"):
                    call()
            cluster.remove("//old/kv")
            cluster.create("table", "//old/kv", attributes={"dynamic": True, "schema": [
                {"name": "key", "type": "string", "sort_order": "ascending"}, {"name": "value", "type": "int64"}]})
            cluster.insert_rows("//old/kv", [{"key": "a", "value": 1}])
            assert cluster.select_rows("//old/kv") == [{"key": "a", "value": 1}]
        assert not (old_root / "unpickled").exists()

    def test_queues_and_static_tables_of_the_earlier_layout_are_read_and_extended(self, old_root):
        with connect(f"local://{old_root}") as cluster:
            cluster.insert_rows("//old/queue", [{"n": 3, "data": "d"}])
            assert [r["n"] for b in cluster.read_tablet("//old/queue", 0, 0, 4) for r in b.to_pylist()] == [0, 1, 2, 3]
            cluster.trim_rows("//old/queue", 0, 3)
            assert [r["n"] for b in cluster.read_tablet("//old/queue", 0, 3, 4) for r in b.to_pylist()] == [3]
            assert cluster.get("//old/static/@row_count") == 3
            cluster.write_table("//old/static", [{"n": 3, "data": "d"}], append=True)
            assert [r["n"] for b in cluster.read_table("//old/static") for r in b.to_pylist()] == [0, 1, 2, 3]
            with cluster.transaction() as tx:
                assert tx.publish_table("//old/static", "//old/queue") == 4
            assert cluster.get_tablet_infos("//old/queue")[0].total_row_count == 8

    def test_a_root_of_the_earlier_layout_stamps_cumulative_data_weight_on_new_queues(self, old_root):
        with connect(f"local://{old_root}") as cluster:
            cluster.create("table", "//old/weighed", attributes={"dynamic": True, "schema": [
                {"name": "data", "type": "string"}, {"name": "$cumulative_data_weight", "type": "int64"}]})
            cluster.insert_rows("//old/weighed", [{"data": "abc"}, {"data": "de"}])
            weights = [r["$cumulative_data_weight"] for b in cluster.read_tablet("//old/weighed", 0, 0, 2)
                       for r in b.to_pylist()]
        assert weights == [12, 23]  # 1 + 8 (the column) + the payload, running


def test_a_range_read_sends_full_stored_chunks_as_they_are_and_regroups_small_appends(cluster):
    """Full stored chunks are batches worth sending (`rebatch`'s `WHOLE_SHARE` of the read's row limit): each comes
    as it is stored, never copied into a bigger batch; a queue of small appends comes regrouped."""
    assert STORED_CHUNK_ROWS * WHOLE_SHARE >= READ_BATCH_ROWS
    cluster.create("table", "//t/big", recursive=True, attributes={"dynamic": True, "schema": ROWS_SCHEMA})
    rows = 3 * STORED_CHUNK_ROWS + 5
    cluster.insert_rows("//t/big", pa.table({"n": pa.array(range(rows), pa.int64()), "data": ["x"] * rows}))
    big = list(cluster.read_tablet("//t/big", 0, 3, rows))
    assert [b.num_rows for b in big] == [STORED_CHUNK_ROWS - 3, STORED_CHUNK_ROWS, STORED_CHUNK_ROWS, 5]
    assert [n for b in big for n in b.column("n").to_pylist()] == list(range(3, rows))
    cluster.create("table", "//t/small", recursive=True, attributes={"dynamic": True, "schema": ROWS_SCHEMA})
    for lo in range(0, 1000, 10):
        cluster.insert_rows("//t/small", pa.table({"n": pa.array(range(lo, lo + 10), pa.int64()), "data": ["x"] * 10}))
    small = list(cluster.read_tablet("//t/small", 0, 0, 1000))
    assert [b.num_rows for b in small] == [1000]
    assert small[0].column("n").to_pylist() == list(range(1000))


def test_a_range_read_is_one_snapshot_rows_trimmed_while_it_runs_still_come(cluster):
    cluster.create("table", "//t/queue", recursive=True, attributes={"dynamic": True, "schema": ROWS_SCHEMA})
    rows = 3 * STORED_CHUNK_ROWS  # three stored chunks, read one blob at a time
    cluster.insert_rows("//t/queue", pa.table({"n": pa.array(range(rows), pa.int64()), "data": ["x"] * rows}))
    reading = cluster.read_tablet("//t/queue", 0, 0, rows, max_rows=1000)
    first = next(reading)
    cluster.trim_rows("//t/queue", 0, rows)  # deletes every chunk and its blob
    read = [first, *reading]
    assert [n for b in read for n in b.column("n").to_pylist()] == list(range(rows))
    assert cluster.get_tablet_infos("//t/queue")[0].trimmed_row_count == rows
