"""`df.write.format("yt")` on real local Spark: batch DataFrames, `foreachBatch`, composite types, misfits."""

from __future__ import annotations

import datetime as dt
import decimal
import re

import pytest
from pyspark.sql import types as T
from pyspark.sql.utils import StreamingQueryException
from yt import yson

from streaming_core.cluster import SchemaError
from tests.support.cluster import make_queue
from tests.support.sink import COPY_SCHEMA, fill_queue, make_table, multiset, ordered_rows

pytestmark = pytest.mark.spark

#: One column of each composite (and non-trivial scalar) type the sink must write.
TYPED_SCHEMA = [
    {"name": "id", "type": "int64", "required": True},
    {"name": "tags", "type_v3": {"type_name": "list", "item": "string"}},
    {"name": "point", "type_v3": {"type_name": "struct", "members": [
        {"name": "x", "type": "int64"}, {"name": "label", "type": {"type_name": "optional", "item": "string"}}]}},
    {"name": "attrs", "type_v3": {"type_name": "dict", "key": "string", "value": "int64"}},
    {"name": "maybe", "type_v3": {"type_name": "optional", "item": "int64"}},
    {"name": "price", "type_v3": {"type_name": "decimal", "precision": 10, "scale": 2}},
    {"name": "day", "type": "date"},
    {"name": "at", "type": "timestamp"},
]
TYPED_SPARK = T.StructType([
    T.StructField("id", T.LongType(), False),
    T.StructField("tags", T.ArrayType(T.StringType(), False), False),
    T.StructField("point", T.StructType([T.StructField("x", T.LongType(), False),
                                         T.StructField("label", T.StringType())]), False),
    T.StructField("attrs", T.MapType(T.StringType(), T.LongType(), False), False),
    T.StructField("maybe", T.LongType()),
    T.StructField("price", T.DecimalType(10, 2), False),
    T.StructField("day", T.DateType(), False),
    T.StructField("at", T.TimestampType(), False),
])
AT = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.UTC)
TYPED_ROWS = [
    (1, ["a", "b"], (3, "p"), {"k": 1}, None, decimal.Decimal("12.34"), dt.date(2024, 5, 6), AT),
    (2, [], (-1, None), {}, 7, decimal.Decimal("-0.50"), dt.date(1970, 1, 1), AT),
]
STORED = [
    {"id": 1, "tags": ["a", "b"], "point": {"x": 3, "label": "p"}, "attrs": [("k", 1)], "maybe": None,
     "price": decimal.Decimal("12.34"), "day": dt.date(2024, 5, 6), "at": AT},
    {"id": 2, "tags": [], "point": {"x": -1, "label": None}, "attrs": [], "maybe": 7,
     "price": decimal.Decimal("-0.50"), "day": dt.date(1970, 1, 1), "at": AT},
]


def test_a_batch_dataframe_is_appended_with_mode_append(spark, yt, yt_root):
    make_table(yt, f"{yt_root}/out", COPY_SCHEMA)
    df = spark.createDataFrame([("a", 1), ("b", 2), ("c", 3)], "data string, n long")
    df.write.format("yt").mode("append").save(f"{yt_root}/out")
    df.write.format("yt").mode("append").save(f"{yt_root}/out")
    assert multiset(ordered_rows(yt, f"{yt_root}/out"), "data", "n") == multiset(
        [{"data": d, "n": n} for d, n in [("a", 1), ("b", 2), ("c", 3)] * 2], "data", "n")


def test_a_batch_write_failing_in_one_task_writes_nothing_and_leaves_no_staged_rows(spark, yt, yt_root):
    """All or nothing: one task's null in a required column fails the write; what the other task staged is
    dropped with the rest, and the error names the row and the column."""
    make_table(yt, f"{yt_root}/out", [{"name": "data", "type": "string", "required": True},
                                      {"name": "n", "type": "int64"}])
    rows = [(f"r{i}", i) for i in range(99)] + [(None, 99)]
    with pytest.raises(Exception, match=r"column 'data' is required but null"):
        spark.createDataFrame(rows, "data string, n long").repartition(2, "n").write.format("yt") \
            .mode("append").save(f"{yt_root}/out")
    assert ordered_rows(yt, f"{yt_root}/out") == []
    staging = f"{yt_root}/out_staging"
    assert not yt.exists(staging) or yt.list(staging) == []


def test_foreach_batch_writes_each_micro_batch_with_df_write(spark, yt, yt_root):
    """Seed listing 1's shape: a `yt:///` checkpoint and `frame.write.mode(Append)` to a result table."""
    make_queue(yt, f"{yt_root}/q", consumer=f"{yt_root}/c")
    rows = fill_queue(yt, f"{yt_root}/q", 30)
    make_table(yt, f"{yt_root}/result", COPY_SCHEMA)
    seen = []

    def write_batch(frame, batch_num):
        seen.append(batch_num)
        frame.write.mode("append").format("yt").save(f"{yt_root}/result")

    numbers = (spark.readStream.format("yt").option("consumer_path", f"{yt_root}/c")
               .option("max_rows_per_partition", 10).load(f"{yt_root}/q"))
    query = (numbers.writeStream.option("checkpointLocation", f"yt:/{yt_root}/checkpoints")
             .trigger(availableNow=True).foreachBatch(write_batch).start())
    query.awaitTermination(300)
    assert seen == [0, 1, 2]
    assert multiset(ordered_rows(yt, f"{yt_root}/result"), "data", "n") == multiset(rows, "data", "n")


def test_write_type_v3_writes_composite_and_typed_columns(spark, yt, yt_root):
    make_table(yt, f"{yt_root}/out", TYPED_SCHEMA)
    spark.createDataFrame(TYPED_ROWS, TYPED_SPARK).write.format("yt").option("write_type_v3", True) \
        .mode("append").save(f"{yt_root}/out")
    assert sorted(ordered_rows(yt, f"{yt_root}/out"), key=lambda r: r["id"]) == STORED


def test_without_write_type_v3_composite_columns_take_yson_binary(spark, yt, yt_root):
    make_table(yt, f"{yt_root}/out", TYPED_SCHEMA[:4])
    binary = T.StructType([T.StructField("id", T.LongType(), False)]
                          + [T.StructField(n, T.BinaryType()) for n in ("tags", "point", "attrs")])
    rows = [(1, yson.dumps(["a", "b"]), yson.dumps({"x": 3, "label": "p"}), yson.dumps({"k": 1})),
            (2, yson.dumps([]), yson.dumps({"x": -1}), yson.dumps({}))]
    spark.createDataFrame(rows, binary).write.format("yt").mode("append").save(f"{yt_root}/out")
    got = sorted(ordered_rows(yt, f"{yt_root}/out"), key=lambda r: r["id"])
    assert got == [{k: r[k] for k in ("id", "tags", "point", "attrs")} for r in STORED]


class TestMisfitSchema:
    """A DataFrame that does not fit the table fails before any row is written, naming the columns."""

    @pytest.mark.parametrize("columns, named", [
        ("data string, n long, extra string", "columns not in the table: extra"),
        ("data string, n string", "columns of the wrong type: n (string; the table wants int64)"),
        ("n long", "required or key columns missing: data"),
    ])
    def test_batch_write_fails_and_writes_nothing(self, spark, yt, yt_root, columns, named):
        make_table(yt, f"{yt_root}/out", [{"name": "data", "type": "string", "required": True},
                                          {"name": "n", "type": "int64"}])
        values = {"data string, n long, extra string": ("a", 1, "x"), "data string, n string": ("a", "1"),
                  "n long": (1,)}[columns]
        with pytest.raises(Exception, match=re.escape(named)) as e:
            spark.createDataFrame([values] * 5, columns).write.format("yt").mode("append").save(f"{yt_root}/out")
        assert SchemaError.__name__ in str(e.value)
        assert ordered_rows(yt, f"{yt_root}/out") == []

    def test_a_streaming_query_fails_at_start_and_writes_nothing(self, spark, yt, yt_root):
        make_queue(yt, f"{yt_root}/q", consumer=f"{yt_root}/c")
        fill_queue(yt, f"{yt_root}/q", 10)
        make_table(yt, f"{yt_root}/out", [{"name": "data", "type": "int64"}, {"name": "n", "type": "int64"}])
        df = spark.readStream.format("yt").option("consumer_path", f"{yt_root}/c").load(f"{yt_root}/q")
        with pytest.raises(StreamingQueryException, match=r"wrong type: data \(string; the table wants int64\)"):
            (df.writeStream.format("yt").option("path", f"{yt_root}/out")
             .option("checkpointLocation", f"yt:/{yt_root}/cp").trigger(availableNow=True).start()
             .awaitTermination(300))
        assert ordered_rows(yt, f"{yt_root}/out") == []
