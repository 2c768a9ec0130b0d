"""`ytsaurus.wire.arrow_insert`: rows for `insert_rows` in the `arrow` input format, as the proxy's Arrow parser
takes them (`yt/yt/library/formats/arrow_parser.cpp`, see docs/wire_formats.md), and what the proxy (the HTTP
stand-in) reads back from them."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
import yt.yson as yson

from streaming_core.cluster import SchemaError, TableSchema
from streaming_core.cluster.schema import to_arrow_table
from streaming_core.cluster.ytsaurus.wire import arrow_insert
from tests.support.wire_cases import optional

DAY = dt.date(2024, 5, 1)
WHEN = dt.datetime(2024, 5, 1, 12, 0, 1, 250_000, tzinfo=dt.UTC)


SCHEMA = TableSchema.from_yt([
    {"name": "i8", "type_v3": "int8"}, {"name": "u64", "type_v3": "uint64"},
    {"name": "f", "type_v3": "float"}, {"name": "d", "type_v3": optional("double")},
    {"name": "b", "type_v3": "bool"}, {"name": "s", "type_v3": "string"}, {"name": "u", "type_v3": optional("utf8")},
    {"name": "day", "type_v3": "date"}, {"name": "sec", "type_v3": optional("datetime")},
    {"name": "ts", "type_v3": "timestamp"}, {"name": "iv", "type_v3": "interval"},
    {"name": "dec", "type_v3": {"type_name": "decimal", "precision": 10, "scale": 2}},
    {"name": "y", "type_v3": "yson"}, {"name": "n", "type_v3": "null"},
    {"name": "l", "type_v3": {"type_name": "list", "item": optional("int64")}},
    {"name": "st", "type_v3": {"type_name": "struct", "members": [{"name": "a", "type": "int64"},
                                                                  {"name": "b", "type": optional("utf8")}]}},
    {"name": "m", "type_v3": {"type_name": "dict", "key": "utf8", "value": "double"}},
    {"name": "tag", "type_v3": {"type_name": "tagged", "tag": "t", "item": "int32"}},
])
ROWS = [
    {"i8": -128, "u64": 2**64 - 1, "f": 0.5, "d": None, "b": True, "s": "x", "u": "привет", "day": DAY,
     "sec": WHEN.replace(microsecond=0), "ts": WHEN, "iv": -5, "dec": Decimal("-12.34"), "y": yson.dumps({"a": [1]}),
     "n": None, "l": [1, None], "st": {"a": 1, "b": None}, "m": [("k", 1.5)], "tag": 7},
    {"i8": 127, "u64": 0, "f": -1.0, "d": 2.5, "b": False, "s": "", "u": None, "day": dt.date(1970, 1, 1),
     "sec": None, "ts": dt.datetime(1970, 1, 1, tzinfo=dt.UTC), "iv": 0, "dec": Decimal("0.00"), "y": None,
     "n": None, "l": [], "st": {"a": -2, "b": "z"}, "m": [], "tag": -1},
]


def table(schema: TableSchema = SCHEMA, rows: list[dict[str, Any]] = ROWS) -> pa.Table:
    return to_arrow_table(schema, rows, "//t")


def test_rows_come_back_as_they_were_sent():
    sent = table()

    assert arrow_insert.decode(SCHEMA, arrow_insert.encode(SCHEMA, sent)).equals(sent)


def test_dates_travel_as_the_unsigned_integers_the_parser_takes():
    stream = pa.ipc.open_stream(arrow_insert.encode(SCHEMA, table())).read_all()

    assert {n: str(stream.schema.field(n).type) for n in ("day", "sec", "ts")} == {
        "day": "uint32", "sec": "uint32", "ts": "uint64"}
    assert stream.column("day").to_pylist() == [19844, 0]
    assert stream.column("sec").to_pylist() == [1714564801, None]
    assert stream.column("ts").to_pylist() == [1714564801250000, 0]


def test_the_tablet_index_travels_as_a_column():
    sent = table().add_column(0, "$tablet_index", pa.array([1, 0], pa.int64()))

    back = arrow_insert.decode(SCHEMA, arrow_insert.encode(SCHEMA, sent, path="//t"))

    assert back.column("$tablet_index").to_pylist() == [1, 0]
    assert back.drop_columns(["$tablet_index"]).equals(table())


def test_concatenated_streams_are_read_one_after_the_other():
    """The parser starts a new stream decoder after each end-of-stream marker."""
    first, second = table().slice(0, 1), table().slice(1, 1)
    raw = arrow_insert.encode(SCHEMA, first) + arrow_insert.encode(SCHEMA, second)

    assert arrow_insert.decode(SCHEMA, raw).equals(table())


@pytest.mark.parametrize("type_v3", [
    "uuid", "date32", "timestamp64", "interval64",
    {"type_name": "tuple", "elements": [{"type": "int64"}]},
    {"type_name": "variant", "elements": [{"type": "int64"}]},
    optional(optional("int64")),
    {"type_name": "list", "item": "date"},
], ids=["uuid", "date32", "timestamp64", "interval64", "tuple", "variant", "optional of optional", "list of dates"])
def test_types_the_parser_does_not_settle_are_left_to_yson(type_v3):
    schema = TableSchema.from_yt([{"name": "k", "type_v3": "int64"}, {"name": "c", "type_v3": optional(type_v3)}])

    assert not arrow_insert.supported(schema)
    with pytest.raises(SchemaError, match=r"//t: columns \['c'\] have types the arrow input format does not carry"):
        arrow_insert.encode(schema, pa.table({"k": [1], "c": pa.nulls(1, schema.column("c").arrow_field().type)}),
                            path="//t")


def test_the_flat_and_composite_types_it_carries_are_supported():
    assert arrow_insert.supported(SCHEMA)


def test_a_date_before_1970_is_refused_naming_the_column():
    schema = TableSchema.from_yt([{"name": "day", "type_v3": "date"}])
    early = pa.table({"day": pa.array([dt.date(1969, 12, 31)], pa.date32())})

    with pytest.raises(SchemaError, match=r"//t: column 'day': a date before 1970"):
        arrow_insert.encode(schema, early, path="//t")


def test_a_malformed_yson_value_is_refused_before_sending():
    schema = TableSchema.from_yt([{"name": "y", "type_v3": "yson"}])

    with pytest.raises(SchemaError, match=r"column 'y': row 0: not a YSON value"):
        arrow_insert.encode(schema, pa.table({"y": pa.array([b"{a=1"], pa.binary())}))


class TestWhatTheProxyReads:
    def test_a_date_sent_as_an_arrow_date_is_refused_as_the_parser_does(self):
        schema = TableSchema.from_yt([{"name": "day", "type_v3": "date"}])
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, pa.schema([("day", pa.date32())])) as writer:
            writer.write_table(pa.table({"day": pa.array([DAY], pa.date32())}))

        with pytest.raises(SchemaError, match=r"unexpected arrow type date32\[day\] for YT type date"):
            arrow_insert.decode(schema, sink.getvalue().to_pybytes())

    def test_struct_fields_are_matched_by_position_and_missing_columns_are_null(self):
        schema = TableSchema.from_yt([
            {"name": "st", "type_v3": {"type_name": "struct", "members": [{"name": "a", "type": "int64"},
                                                                          {"name": "b", "type": "utf8"}]}},
            {"name": "other", "type_v3": optional("int64")}])
        positional = pa.array([{"x": 1, "y": "one"}], pa.struct([("x", pa.int64()), ("y", pa.string())]))
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, pa.schema([("st", positional.type)])) as writer:
            writer.write_table(pa.table({"st": positional}))

        assert arrow_insert.decode(schema, sink.getvalue().to_pybytes()).to_pylist() == [
            {"st": {"a": 1, "b": "one"}, "other": None}]

    def test_dictionary_encoded_strings_are_read(self):
        schema = TableSchema.from_yt([{"name": "s", "type_v3": "utf8"}])
        encoded = pa.array(["a", "b", "a"]).dictionary_encode()
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, pa.schema([("s", encoded.type)])) as writer:
            writer.write_table(pa.table({"s": encoded}))

        assert arrow_insert.decode(schema, sink.getvalue().to_pybytes()).column("s").to_pylist() == ["a", "b", "a"]

    def test_arrow_input_silently_drops_columns_the_write_schema_lacks(self):
        """YTsaurus' Arrow parser drops a column its write schema lacks: an unknown name, `$timestamp`."""
        sent = TableSchema.from_yt([{"name": "a", "type_v3": "int64"}, {"name": "b", "type_v3": "int64"}])
        raw = arrow_insert.encode(sent, pa.table({"a": [1], "b": [2], "$timestamp": pa.array([7], pa.uint64())}))
        target = TableSchema.from_yt([{"name": "b", "type_v3": "int64"},
                                      {"name": "$timestamp", "type_v3": {"type_name": "optional", "item": "uint64"}}])

        assert arrow_insert.decode(target, raw).to_pylist() == [{"b": 2}]

    def test_bytes_that_are_no_ipc_stream_are_refused(self):
        with pytest.raises(SchemaError, match="not an IPC stream"):
            arrow_insert.decode(SCHEMA, b"{a=1};")
