"""Unit tests of the source's pure logic, without Spark: offsets, options, type mapping, tuning documents."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pyarrow as pa
import pytest
from pyspark.sql import types as T
from yt import yson

from streaming_core.cluster.schema import TableSchema
from streaming_core.offsets import (
    QueueOffset,
    added_partitions,
    batch_end,
    effective_start,
    from_consumer,
    removed_partitions,
)
from streaming_core.options import SourceOptions
from streaming_core.tuning import Tuning, max_bytes_in_force, read_tuning, write_tuning
from streaming_core.types import arrow_schema_for_spark, conform, read_schema, spark_schema, spark_type
from tests.support.source import COMPOSITE_COLUMNS

# -- offsets -------------------------------------------------------------------------------------------


class TestOffsets:
    def test_effective_start_takes_the_consumer_where_it_is_ahead_of_the_checkpoint(self):
        assert effective_start({0: 41, 1: 10, 2: -1}, {0: 30, 1: 19, 2: -1}) == {0: 41, 1: 19, 2: -1}

    def test_partitions_a_checkpoint_does_not_name_yet_start_where_the_consumer_stands(self):
        consumer = from_consumer({0: 5, 2: 7}, 4)  # the queue gained tablets 2 and 3 after the checkpoint
        assert effective_start({0: 9, 1: 3}, consumer) == {0: 9, 1: 3, 2: 6, 3: -1}
        assert added_partitions({0: 9, 1: 3}, 4) == [2, 3] and removed_partitions({0: 9, 1: 3}, 4) == []

    def test_partitions_a_queue_no_longer_has_are_named(self):
        assert removed_partitions({0: 1, 1: 1, 2: 1, 3: -1}, 2) == [2, 3]
        assert added_partitions({0: 1, 1: 1, 2: 1}, 2) == []

    def test_an_offset_gained_partitions_round_trip_through_json(self):
        before = QueueOffset("local", "//q", {0: 41, 1: 7}, "//c")
        after = QueueOffset("local", "//q", {**before.partitions, 2: -1, 3: 4}, "//c")
        text = json.dumps(after.to_json())
        assert list(json.loads(text)["partitions"]) == ["0", "1", "2", "3"]
        assert QueueOffset.from_json(json.loads(text)) == after != before

    def test_consumer_offsets_become_last_read_indices_and_missing_partitions_mean_nothing_read(self):
        assert from_consumer({0: 42}, 3) == {0: 41, 1: -1, 2: -1}

    def test_batch_end_without_cap_reads_up_to_the_last_row(self):
        assert batch_end({0: 9, 1: -1}, {0: 99, 1: 4}, None) == {0: 99, 1: 4}

    def test_batch_end_with_cap_reads_at_most_cap_rows_per_partition(self):
        start, upper = {0: 9, 1: -1, 2: 50}, {0: 99, 1: 4, 2: 50}
        end = batch_end(start, upper, 10)
        assert end == {0: 19, 1: 4, 2: 50}
        assert all(end[p] - start[p] <= 10 for p in start)

    def test_batch_end_never_goes_behind_the_start(self):
        # A consumer moved past the queue's end (or a queue seen before its counters) must not rewind.
        assert batch_end({0: 20}, {0: 15}, 5) == {0: 20}

    def test_offset_json_round_trip_has_string_partition_keys(self):
        offset = QueueOffset("local", "//q", {0: 41, 1: -1, 10: 3}, "//c")
        text = json.dumps(offset.to_json())
        assert json.loads(text)["partitions"] == {"0": 41, "1": -1, "10": 3}
        back = QueueOffset.from_json(json.loads(text))
        assert back == offset
        assert back.consumer_path == "//c"

    def test_spyt_offsets_without_consumer_path_parse(self):
        spyt = json.loads('{"cluster":"hume","path":"//home/q","partitions":{"0":41,"1":-1}}')
        offset = QueueOffset.from_json(spyt)
        assert (offset.cluster, offset.path, offset.partitions, offset.consumer_path) == (
            "hume", "//home/q", {0: 41, 1: -1}, None)
        assert "consumer_path" not in offset.to_json()

    def test_malformed_offset_is_a_clear_error(self):
        with pytest.raises(ValueError, match="not a yt queue offset"):
            QueueOffset.from_json({"cluster": "c", "partitions": {"0": 1}})


# -- options -------------------------------------------------------------------------------------------


def parse(session: dict | None = None, *, streaming: bool = True, **options: str) -> SourceOptions:
    base = {"path": "//q", "consumer_path": "//c", "cluster": "local:///tmp/x"}
    return SourceOptions.parse({**base, **options}, session or {}, streaming=streaming)


class TestOptions:
    def test_defaults(self):
        options = parse()
        assert (options.path, options.consumer_path, options.cluster) == ("//q", "//c", "local:///tmp/x")
        assert (options.max_rows_per_partition, options.include_service_columns, options.parsing_type_v3) == (
            None, False, False)
        assert options.tuning_path == "//c_tuning"

    def test_values_are_parsed_from_strings_and_keys_are_case_insensitive(self):
        options = parse(MAX_ROWS_PER_PARTITION="1000", include_service_columns="True", parsing_type_v3="1")
        assert (options.max_rows_per_partition, options.include_service_columns, options.parsing_type_v3) == (
            1000, True, True)

    @pytest.mark.parametrize(("value", "parsed"), [("4096", 4096), ("16m", 16 << 20), ("64MiB", 64 << 20),
                                                   ("1 GB", 1 << 30), ("8k", 8192), ("100b", 100)])
    def test_the_byte_cap_takes_bytes_or_a_binary_unit(self, value, parsed):
        assert parse(max_bytes_per_partition=value).max_bytes_per_partition == parsed
        assert parse().max_bytes_per_partition is None

    def test_parsing_type_v3_defaults_to_the_session_conf(self):
        assert parse({"spark.yt.read.typeV3.enabled": "true"}).parsing_type_v3 is True
        assert parse({"spark.yt.read.typeV3.enabled": "true"}, parsing_type_v3="false").parsing_type_v3 is False

    def test_cluster_defaults_to_the_session_conf(self):
        options = SourceOptions.parse({"path": "//q"}, {"spark.yt.cluster": "local:///tmp/y"}, streaming=False)
        assert options.cluster == "local:///tmp/y"

    @pytest.mark.parametrize(("options", "named"), [
        ({"max_row_per_partition": "10"}, "max_row_per_partition"),
        ({"max_rows_per_partition": "ten"}, "max_rows_per_partition"),
        ({"max_rows_per_partition": "0"}, "max_rows_per_partition"),
        ({"max_rows_per_partition": ""}, "max_rows_per_partition"),
        ({"max_rows_per_partition": " "}, "max_rows_per_partition"),
        ({"include_service_columns": "maybe"}, "include_service_columns"),
        ({"parsing_type_v3": "2"}, "parsing_type_v3"),
        ({"consumer_path": "tmp/c"}, "consumer_path"),
        ({"path": "/q"}, "path"),
        ({"cluster": "http://proxy"}, "cluster"),
        ({"cluster": "local://relative/root"}, "cluster"),
        ({"tuning_path": "x"}, "tuning_path"),
        ({"max_bytes_per_partition": "lots"}, "max_bytes_per_partition"),
        ({"max_bytes_per_partition": "0"}, "max_bytes_per_partition"),
        ({"max_bytes_per_partition": "-16m"}, "max_bytes_per_partition"),
        ({"max_bytes_per_partition": "1.5g"}, "max_bytes_per_partition"),
        ({"max_bytes_per_partition": "16q"}, "max_bytes_per_partition"),
        ({"max_bytes_per_partition": ""}, "max_bytes_per_partition"),
    ])
    def test_bad_option_is_an_error_naming_it(self, options, named):
        with pytest.raises(ValueError, match=f"'{named}'"):
            parse(**options)

    def test_streaming_without_consumer_path_names_the_option(self):
        with pytest.raises(ValueError, match="'consumer_path' is required"):
            SourceOptions.parse({"path": "//q", "cluster": "local:///tmp/x"}, {}, streaming=True)

    def test_batch_reads_need_no_consumer(self):
        assert parse(streaming=False, consumer_path="").consumer_path is None


# -- types -------------------------------------------------------------------------------------------

COMPOSITE_SCHEMA = TableSchema.from_yt(COMPOSITE_COLUMNS)


class TestTypes:
    def test_composite_yt_types_map_to_spark_types(self):
        schema = spark_schema(read_schema(COMPOSITE_SCHEMA, type_v3=True))
        by_name = {f.name: f for f in schema}
        assert by_name["l"].dataType == T.ArrayType(T.LongType(), False)
        assert by_name["s"].dataType == T.StructType([
            T.StructField("a", T.LongType(), False), T.StructField("b", T.StringType(), True)])
        assert by_name["d"].dataType == T.MapType(T.StringType(), T.LongType(), False)
        assert (by_name["o"].dataType, by_name["o"].nullable) == (T.LongType(), True)
        assert by_name["l"].nullable is False
        assert by_name["t"].dataType == T.StructType([
            T.StructField("_1", T.LongType(), False), T.StructField("_2", T.StringType(), False)])
        assert by_name["dec"].dataType == T.DecimalType(10, 2)
        assert by_name["day"].dataType == T.DateType()
        assert by_name["ts"].dataType == T.TimestampType()

    def test_without_type_v3_composites_are_yson_binary_and_scalars_keep_their_types(self):
        schema = spark_schema(read_schema(COMPOSITE_SCHEMA, type_v3=False))
        kinds = {f.name: f.dataType for f in schema}
        assert {n for n, t in kinds.items() if t == T.BinaryType()} == {"l", "s", "d", "t"}
        assert (kinds["o"], kinds["dec"], kinds["day"]) == (T.LongType(), T.DecimalType(10, 2), T.DateType())

    def test_unsigned_integers_widen(self):
        assert spark_type(pa.uint8()) == T.ShortType()
        assert spark_type(pa.uint32()) == T.LongType()

    def test_type_without_spark_counterpart_is_an_error(self):
        with pytest.raises(TypeError, match="no Spark counterpart"):
            spark_type(pa.duration("s"))

    def test_conform_casts_to_sparks_arrow_types_and_encodes_yson_columns(self):
        row = {"l": [1, 2], "s": {"a": 1, "b": None}, "d": [("k", 7)], "o": None, "t": {"_1": 5, "_2": "x"},
               "dec": decimal.Decimal("12.34"), "day": dt.date(2024, 5, 6),
               "ts": dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.UTC)}
        stored = pa.RecordBatch.from_pylist([row], schema=COMPOSITE_SCHEMA.arrow_schema())
        target = arrow_schema_for_spark(spark_schema(read_schema(COMPOSITE_SCHEMA, type_v3=False)))
        out = conform(stored, target, frozenset({"l", "s", "d", "t"}))
        assert out.schema == target
        values = out.to_pylist()[0]
        assert yson.loads(values["l"]) == [1, 2]
        assert yson.loads(values["d"]) == [["k", 7]]
        assert (values["dec"], values["day"], values["o"]) == (row["dec"], row["day"], None)


# -- tuning documents --------------------------------------------------------------------------------


class TestTuning:
    def test_missing_document_means_no_override(self, yt, yt_root):
        assert read_tuning(yt, f"{yt_root}/none") == Tuning()
        assert read_tuning(yt, None) == Tuning()

    @pytest.mark.parametrize("value", [[1, 2], {"max_rows_per_partition": -3}, {"max_rows_per_partition": "10"},
                                       {"dyn_batch_size": True}, {"max_bytes_per_partition": "16m"}])
    def test_malformed_document_is_ignored(self, yt, yt_root, value):
        path = f"{yt_root}/tuning"
        yt.create("document", path, attributes={"value": value})
        assert read_tuning(yt, path) == Tuning()

    @pytest.mark.parametrize(("values", "named"), [
        ({"max_rows_per_partition": 0}, "max_rows_per_partition"), ({"dyn_batch_size": -1}, "dyn_batch_size"),
        ({"max_rows_per_partition": 10, "dyn_batch_size": 0}, "dyn_batch_size"),
        ({"max_bytes_per_partition": 0}, "max_bytes_per_partition")])
    def test_writing_a_value_that_is_not_positive_is_refused_and_stores_nothing(self, yt, yt_root, values, named):
        path = f"{yt_root}/t/tuning"
        write_tuning(yt, path, max_rows_per_partition=500)
        with pytest.raises(ValueError, match=named):
            write_tuning(yt, path, **values)
        assert read_tuning(yt, path).max_rows_per_partition == 500

    def test_written_values_are_read_back_and_kept_when_not_given(self, yt, yt_root):
        path = f"{yt_root}/a/tuning"
        write_tuning(yt, path, max_rows_per_partition=500, reason="backlog")
        write_tuning(yt, path, dyn_batch_size=200)
        tuning = read_tuning(yt, path)
        assert (tuning.max_rows_per_partition, tuning.dyn_batch_size) == (500, 200)
        assert tuning.updated_at is not None

    def test_the_byte_cap_is_a_key_of_its_own_in_force_over_the_option(self, yt, yt_root):
        path = f"{yt_root}/b/tuning"
        write_tuning(yt, path, max_rows_per_partition=500)
        assert max_bytes_in_force(read_tuning(yt, path), 1 << 20) == 1 << 20
        write_tuning(yt, path, max_bytes_per_partition=4096, reason="rows grew wide")
        tuning = read_tuning(yt, path)
        assert (tuning.max_rows_per_partition, tuning.max_bytes_per_partition) == (500, 4096)
        assert (max_bytes_in_force(tuning, 1 << 20), max_bytes_in_force(Tuning(), None)) == (4096, None)


def test_malformed_composite_type_is_a_schema_error_naming_the_column():
    from streaming_core.cluster import SchemaError

    with pytest.raises(SchemaError, match="column 'd'"):
        TableSchema.from_yt([{"name": "d", "type_v3": {"type_name": "dict", "key": "string"}}])
