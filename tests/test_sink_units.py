"""The sink's pieces that need no Spark: chunking, dynBatchSize resolution, schema checks, checkpoint conf."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import types as T
from structlog.testing import capture_logs

from streaming_core.cluster import SchemaError
from streaming_core.cluster.base import MAX_ROWS_PER_TABLET_TRANSACTION
from streaming_core.cluster.embedded import EmbeddedCluster
from streaming_core.options import SinkOptions
from streaming_core.session import checkpoint_conf
from streaming_core.sink import check_transaction_size, chunk_rows, chunks, plan_sink
from streaming_core.tuning import write_tuning
from tests.support.sink import COPY_SCHEMA, make_table


def _batches(*sizes: int) -> list[pa.RecordBatch]:
    start = 0
    out = []
    for size in sizes:
        out.append(pa.record_batch({"n": list(range(start, start + size))}))
        start += size
    return out


class TestChunks:
    def test_batches_are_regrouped_into_chunks_of_exactly_the_size_across_batch_boundaries(self):
        got = list(chunks(iter(_batches(3, 10, 1, 6)), 4))
        assert [c.num_rows for c in got] == [4, 4, 4, 4, 4]
        assert [v for c in got for v in c.column("n").to_pylist()] == list(range(20))

    def test_the_last_chunk_holds_the_rest(self):
        assert [c.num_rows for c in chunks(iter(_batches(7, 4)), 5)] == [5, 5, 1]

    def test_no_rows_make_no_chunk(self):
        assert list(chunks(iter(_batches(0, 0)), 5)) == []


class TestChunkRows:
    def _plan(self, yt, yt_root, **options):
        make_table(yt, f"{yt_root}/out", COPY_SCHEMA)
        parsed = SinkOptions.parse({"path": f"{yt_root}/out", "cluster": yt.uri, **options}, {})
        return plan_sink(parsed, T.StructType().add("data", "string").add("n", "long"), overwrite=False)

    def test_the_option_is_used_when_there_is_no_tuning_document(self, yt, yt_root):
        plan = self._plan(yt, yt_root, dyn_batch_size="700", tuning_path=f"{yt_root}/tuning")
        assert chunk_rows(plan, yt) == 700

    def test_the_tuning_document_overrides_the_option_and_is_read_at_every_call(self, yt, yt_root):
        plan = self._plan(yt, yt_root, dyn_batch_size="700", tuning_path=f"{yt_root}/tuning")
        write_tuning(yt, f"{yt_root}/tuning", dyn_batch_size=300)
        assert chunk_rows(plan, yt) == 300
        write_tuning(yt, f"{yt_root}/tuning", dyn_batch_size=400)
        assert chunk_rows(plan, yt) == 400

    def test_a_size_above_the_per_transaction_limit_is_split_below_it(self, yt, yt_root):
        plan = self._plan(yt, yt_root, dyn_batch_size="250000", tuning_path=f"{yt_root}/tuning")
        assert chunk_rows(plan, yt) == MAX_ROWS_PER_TABLET_TRANSACTION
        got = [c.num_rows for c in chunks(iter(_batches(120_000, 130_000)), chunk_rows(plan, yt))]
        assert got == [100_000, 100_000, 50_000]

    def test_a_tuning_value_above_the_limit_is_split_too(self, yt, yt_root):
        plan = self._plan(yt, yt_root, tuning_path=f"{yt_root}/tuning")
        write_tuning(yt, f"{yt_root}/tuning", dyn_batch_size=500_000)
        assert chunk_rows(plan, yt) == MAX_ROWS_PER_TABLET_TRANSACTION


class TestSchemaCheck:
    """`plan_sink` runs when the query (or `df.write`) starts, before any task writes a row."""

    TARGET = [
        {"name": "k", "type": "string", "sort_order": "ascending"},
        {"name": "count", "type": "int64", "required": True},
        {"name": "tags", "type_v3": {"type_name": "optional", "item": {"type_name": "list", "item": "string"}}},
        {"name": "note", "type": "string"},
    ]

    def _check(self, yt, yt_root, df_schema: T.StructType, **options):
        make_table(yt, f"{yt_root}/sorted", self.TARGET)
        parsed = SinkOptions.parse({"path": f"{yt_root}/sorted", "cluster": yt.uri, **options}, {})
        return plan_sink(parsed, df_schema, overwrite=False)

    def test_a_fitting_schema_passes_with_narrower_integers_and_optional_columns_left_out(self, yt, yt_root):
        plan = self._check(yt, yt_root, T.StructType().add("k", "string").add("count", "integer"),
                           write_type_v3="true")
        assert plan.kind == "sorted_dynamic"

    def test_every_misfit_is_named_at_once(self, yt, yt_root):
        df = T.StructType().add("k", "string").add("note", "long").add("extra", "string")
        with pytest.raises(SchemaError) as e:
            self._check(yt, yt_root, df)
        message = str(e.value)
        assert "columns not in the table: extra;" in message
        assert "required or key columns missing: count;" in message
        assert "columns of the wrong type: note (int64; the table wants string)" in message

    def test_a_missing_key_column_is_an_error_even_when_it_is_optional(self, yt, yt_root):
        with pytest.raises(SchemaError, match="required or key columns missing: k "):
            self._check(yt, yt_root, T.StructType().add("count", "long"))

    @pytest.mark.parametrize("column, type_", [
        ("count", T.StringType()), ("count", T.DoubleType()), ("note", T.BinaryType()),
        ("tags", T.ArrayType(T.LongType())), ("tags", T.StringType()),
    ])
    def test_a_column_of_a_type_that_does_not_convert_is_named(self, yt, yt_root, column, type_):
        fields = {"k": T.StringType(), "count": T.LongType(), column: type_}
        df = T.StructType([T.StructField(n, t) for n, t in fields.items()])
        with pytest.raises(SchemaError, match=f"columns of the wrong type: {column} "):
            self._check(yt, yt_root, df, write_type_v3="true")

    def test_composite_columns_take_yson_binary_without_write_type_v3_only(self, yt, yt_root):
        df = T.StructType().add("k", "string").add("count", "long").add("tags", "binary")
        self._check(yt, yt_root, df)
        with pytest.raises(SchemaError, match=r"wrong type: tags \(binary"):
            plan_sink(SinkOptions.parse({"path": f"{yt_root}/sorted", "cluster": yt.uri, "write_type_v3": "true"},
                                        {}), df, overwrite=False)

    def test_a_struct_with_a_member_the_table_lacks_does_not_fit(self, yt, yt_root):
        make_table(yt, f"{yt_root}/s", [{"name": "s", "type_v3": {"type_name": "struct", "members": [
            {"name": "a", "type": "int64"}]}}])
        df = T.StructType().add("s", T.StructType().add("a", "long").add("b", "long"))
        with pytest.raises(SchemaError, match="wrong type: s "):
            plan_sink(SinkOptions.parse({"path": f"{yt_root}/s", "cluster": yt.uri, "write_type_v3": "true"}, {}),
                      df, overwrite=False)


class TestCheckpointConf:
    def test_on_ytsaurus_yt_paths_are_served_by_spyt_yt_file_system_from_the_wheels_jars(
            self, tmp_path, monkeypatch):
        jars = tmp_path / "spyt" / "jars"
        for folder, name in (("common", "yson.jar"), ("scala-2.13", "file-system_2.13.jar"),
                             ("scala-2.12", "file-system_2.12.jar")):
            (jars / folder).mkdir(parents=True)
            (jars / folder / name).write_bytes(b"")
        (tmp_path / "spyt" / "__init__.py").write_text("")
        monkeypatch.syspath_prepend(str(tmp_path))
        conf = checkpoint_conf("yt://hahn.example.net")
        assert conf["spark.hadoop.fs.yt.impl"] == "tech.ytsaurus.spyt.fs.YtFileSystem"
        assert conf["spark.hadoop.yt.proxy"] == "hahn.example.net"
        assert conf["spark.jars"].split(",") == [str(jars / "common" / "yson.jar"),
                                                 str(jars / "scala-2.13" / "file-system_2.13.jar")]

    def test_without_the_spyt_extra_yt_paths_are_left_unmapped_with_a_warning(self):
        with capture_logs() as logs:
            conf = checkpoint_conf("yt://hahn.example.net")
        assert conf == {"spark.hadoop.yt.proxy": "hahn.example.net"}
        assert [e for e in logs if e["log_level"] == "warning" and "yt-streaming-opsd[spyt]" in e["fix"]]

    def test_on_the_embedded_cluster_yt_paths_fall_back_to_the_cluster_root(self, tmp_path):
        conf = checkpoint_conf(f"local://{tmp_path}")
        assert conf["spark.hadoop.fs.yt.impl"] == "org.apache.hadoop.fs.viewfs.ViewFileSystemOverloadScheme"
        assert conf["spark.hadoop.fs.viewfs.mounttable.default.linkFallback"] == f"file://{tmp_path}"


class TestTransactionSize:
    """A transactional batch that cannot fit one tablet transaction fails before writing, naming the fix."""

    def test_batch_over_the_clusters_per_tablet_limit_is_refused_whatever_the_tablet_count(self, yt, yt_root,
                                                                                            monkeypatch):
        """All of a commit's rows may land on one tablet (a sorted target's keys, an ordered target's rows without
        `$tablet_index`), so two tablets do not double the limit."""
        target = f"{yt_root}/out"
        yt.create("table", target, attributes={"dynamic": True, "tablet_count": 2, "schema": [
            {"name": "n", "type": "int64"}]})
        monkeypatch.setattr(EmbeddedCluster, "max_rows_per_tablet_transaction", 10)
        check_transaction_size(yt, target, 10, batch_id=3)
        with pytest.raises(SchemaError, match=r"micro-batch 3 .* 11 rows .*max_rows_per_partition"):
            check_transaction_size(yt, target, 11, batch_id=3)

    def test_no_limit_on_the_embedded_cluster(self, yt, yt_root):
        check_transaction_size(yt, f"{yt_root}/absent", 10**9, batch_id=0)
