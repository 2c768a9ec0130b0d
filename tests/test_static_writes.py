"""Batch writes of static tables on real local Spark: Spark's save modes, SPYT's shorthands, seed listing 1.

PySpark 4.2 refuses the save modes "errorifexists" and "ignore" for Python data sources before the source
sees the write; `df.write.yt(path)` passes them as the option `save_mode` (see `streaming_core.save_modes`).
"""

from __future__ import annotations

import datetime as dt
import re

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql.functions import col, floor, rand, udf, window

from streaming_core.cluster import Cluster
from streaming_core.cluster.base import ORDERED, STATIC
from tests.support.sink import COPY_SCHEMA, make_table, ordered_rows, run_listing

pytestmark = pytest.mark.spark

ROWS = [(2, "b"), (1, "a"), (3, "c")]


def static_rows(yt: Cluster, path: str) -> list[dict]:
    return [r for batch in yt.read_table(path) for r in batch.to_pylist()]


def as_dicts(rows: list[tuple]) -> list[dict]:
    return [{"id": i, "s": s} for i, s in rows]


@pytest.fixture
def df(spark):
    return spark.createDataFrame(ROWS, "id long, s string").coalesce(1)


class TestSaveModes:
    def test_append_creates_a_static_table_from_the_dataframe_then_appends(self, df, yt, yt_root):
        path = f"{yt_root}/new/out"
        df.write.mode("append").yt(path)
        df.write.format("yt").mode("append").save(path)
        assert yt.node_info(path).kind == STATIC
        assert yt.get(f"{path}/@schema") == [{"name": "id", "type_v3": {"type_name": "optional", "item": "int64"}},
                                             {"name": "s", "type_v3": {"type_name": "optional", "item": "string"}}]
        assert static_rows(yt, path) == as_dicts(ROWS) * 2

    def test_overwrite_replaces_rows_and_schema(self, spark, df, yt, yt_root):
        path = f"{yt_root}/out"
        spark.createDataFrame([("x",)], "other string").write.yt(path)
        df.write.mode("overwrite").yt(path)
        assert yt.get_schema(path).names == ["id", "s"]
        assert static_rows(yt, path) == as_dicts(ROWS)
        df.limit(1).write.format("yt").mode("overwrite").save(path)
        assert static_rows(yt, path) == as_dicts(ROWS[:1])

    def test_errorifexists_is_the_default_and_leaves_an_existing_table_unchanged(self, df, yt, yt_root):
        path = f"{yt_root}/out"
        df.write.yt(path)  # a missing path is created
        with pytest.raises(Exception, match=re.escape(f"{path}: already exists and the save mode is errorifexists")):
            df.write.yt(path)
        with pytest.raises(Exception, match="already exists"):
            df.write.format("yt").option("save_mode", "errorifexists").mode("append").save(path)
        assert static_rows(yt, path) == as_dicts(ROWS)

    def test_spark_itself_refuses_errorifexists_and_ignore_for_format_yt(self, df, yt_root):
        for mode in ("errorifexists", "ignore"):
            with pytest.raises(AnalysisException, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
                df.write.format("yt").mode(mode).save(f"{yt_root}/out")

    def test_a_failed_overwrite_leaves_the_table_as_it_was(self, df, yt, yt_root):
        path = f"{yt_root}/out"
        df.write.yt(path)

        @udf("long")
        def fail_on_three(i):
            if i == 3:
                raise ValueError("row three is bad")
            return i

        with pytest.raises(Exception, match="row three is bad"):
            df.select(fail_on_three("id").alias("id"), "s").write.mode("overwrite").yt(path)
        assert static_rows(yt, path) == as_dicts(ROWS)
        assert yt.list(yt_root) == ["out"]  # the table being filled is dropped

    def test_ignore_writes_nothing_to_an_existing_table(self, spark, df, yt, yt_root):
        path = f"{yt_root}/out"
        df.write.mode("ignore").yt(path)
        spark.createDataFrame([("x",)], "other string").write.mode("ignore").yt(path)
        assert static_rows(yt, path) == as_dicts(ROWS)

    def test_dynamic_tables_keep_inserting_and_refuse_overwrite(self, spark, yt, yt_root):
        path = f"{yt_root}/queue"
        make_table(yt, path, COPY_SCHEMA)
        frame = spark.createDataFrame([("a", 1)], "data string, n long")
        frame.write.mode("append").yt(path)
        with pytest.raises(Exception, match=re.escape(f"{path}: save mode overwrite replaces static tables only")):
            frame.write.mode("overwrite").yt(path)
        assert yt.node_info(path).kind == ORDERED
        assert ordered_rows(yt, path) == [{"data": "a", "n": 1}]

    def test_a_dataframe_that_does_not_fit_a_static_table_fails_and_leaves_it_unchanged(self, spark, df, yt, yt_root):
        path = f"{yt_root}/out"
        df.write.yt(path)
        misfit = spark.createDataFrame([("x", "y")], "id string, extra string")
        with pytest.raises(Exception, match=r"columns not in the table: extra; columns of the wrong type: id \(string"):
            misfit.write.mode("append").yt(path)
        assert static_rows(yt, path) == as_dicts(ROWS)

    def test_a_column_without_a_yt_type_is_named_and_nothing_is_created(self, spark, yt, yt_root):
        frame = spark.createDataFrame([(1, dt.timedelta(seconds=3))], "id long, took interval day to second")
        with pytest.raises(Exception, match=r"columns with no YT type: took \(Spark type interval day to second"):
            frame.write.mode("append").yt(f"{yt_root}/out")
        assert not yt.exists(f"{yt_root}/out")


class TestShorthands:
    def test_sorted_by_and_optimize_for_make_a_sorted_static_table(self, spark, df, yt, yt_root):
        path = f"{yt_root}/sorted"
        df.write.sorted_by("id").optimize_for("scan").yt(path, mode="overwrite")
        assert yt.get_schema(path).key_columns == ["id"]
        assert yt.get(f"{path}/@optimize_for") == "scan"
        assert [r.id for r in spark.read.yt(path).collect()] == [1, 2, 3]

    def test_read_yt_unions_several_paths_with_the_reader_options(self, spark, df, yt_root):
        first, second = f"{yt_root}/a", f"{yt_root}/b"
        df.write.yt(first)
        df.limit(1).write.yt(second)
        read = spark.read.option("parsing_type_v3", "true").yt(first, second)
        assert sorted(tuple(r) for r in read.collect()) == sorted(ROWS + ROWS[:1])

    def test_a_bad_option_value_is_named(self, df, yt_root):
        with pytest.raises(Exception, match="option 'optimize_for' must be one of"):
            df.write.optimize_for("speed").yt(f"{yt_root}/out")


def test_listing_1_python_as_typed(spark, yt, yt_root):
    """Seed listing 1 in Python, but for paths: `foreachBatch` writes with `frame.write.mode("append").yt(...)`
    to a table that does not exist yet; the first micro-batch creates it as a static table."""
    checkpoints, result = f"yt:/{yt_root}/sample01/checkpoints", f"{yt_root}/sample01/result"

    def listing_1() -> None:
        numbers = spark \
            .readStream \
            .format("rate") \
            .option("rowsPerSecond", 1) \
            .load() \
            .select(col("timestamp"), floor(rand() * 10).alias("num"))
        grouped_numbers = numbers \
            .withWatermark("timestamp", "5 seconds") \
            .groupBy(window(col("timestamp"), "5 seconds", "3 seconds"), col("num")) \
            .count()
        job = grouped_numbers \
            .writeStream \
            .option("checkpointLocation", checkpoints) \
            .trigger(processingTime="1000 milliseconds") \
            .foreachBatch(lambda frame, batch_num: frame.write.mode("append").yt(result))
        query = job.start()
        query.awaitTermination()

    run_listing(spark, listing_1, lambda: yt.exists(result) and yt.get(f"{result}/@row_count") > 0)
    assert yt.node_info(result).kind == STATIC
    assert [c.name for c in yt.get_schema(result).columns] == ["window", "num", "count"]
    assert all(r["count"] >= 1 and r["window"] for r in static_rows(yt, result))
