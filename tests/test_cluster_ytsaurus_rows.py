"""`ytsaurus.rows` and `ytsaurus.wire`: values between Arrow and YTsaurus' YSON rows, type by type.

Round trips go through real YSON bytes, both ways the backend can call the client: bytes written by
`encode_wire` and read by `decode_wire` (`raw=True` calls), and Python rows (`to_yt_rows`) dumped and parsed
with the adapter's own `WIRE_FORMAT` and read back by `from_yt_rows` (`raw=False` calls), so the converters
meet what the parser really returns. Exact wire shapes are checked on the bytes, parsed by the bindings,
against the representations of the YTsaurus docs ("Data types", section "YSON").
"""

from __future__ import annotations

import datetime as dt
import io
import struct
import subprocess
import sys
from decimal import Context, Decimal
from typing import Any

import pyarrow as pa
import pytest
import yt.yson as yson

from streaming_core.cluster import SchemaError, TableSchema
from streaming_core.cluster.schema import to_arrow_table
from streaming_core.cluster.ytsaurus.rows import WIRE_FORMAT, from_yt_rows, to_yt_rows
from streaming_core.cluster.ytsaurus.wire import decode_wire, encode_wire
from tests.support.wire_cases import (
    DAY,
    ROUND_TRIPS,
    WHEN,
    decimal_type,
    dict_type,
    list_type,
    one_column,
    optional,
    struct_type,
    tuple_type,
)


def as_python_rows(schema: TableSchema, table: pa.Table) -> pa.Table:
    """Through `raw=False` calls: Python rows dumped and parsed by `WIRE_FORMAT` (the bindings)."""
    stream = io.BytesIO()
    WIRE_FORMAT.dump_rows(to_yt_rows(schema, table), stream)
    return from_yt_rows(schema, list(WIRE_FORMAT.load_rows(io.BytesIO(stream.getvalue()))))


def as_bytes(schema: TableSchema, table: pa.Table) -> pa.Table:
    """Through `raw=True` calls: the bytes themselves."""
    return decode_wire(schema, encode_wire(schema, table))


def sent(type_v3: Any, values: list[Any]) -> list[Any]:
    """What goes on the wire for a one-column table of `values`: the bytes, parsed by the bindings."""
    schema = one_column(type_v3)
    raw = encode_wire(schema, to_arrow_table(schema, [{"c": v} for v in values], "//t"))
    return [row["c"] for row in yson.loads(raw, yson_type="list_fragment")]


def read(type_v3: Any, wire_values: list[Any]) -> list[Any]:
    """What a one-column table reads as when the proxy sends `wire_values` (dumped as binary YSON)."""
    raw = yson.dumps([{"c": v} for v in wire_values], yson_type="list_fragment", yson_format="binary")
    return decode_wire(one_column(type_v3), raw).column("c").to_pylist()


@pytest.mark.parametrize("way", [as_bytes, as_python_rows], ids=["bytes", "python rows"])
@pytest.mark.parametrize("type_v3, values", ROUND_TRIPS.values(), ids=ROUND_TRIPS.keys())
def test_values_come_back_as_they_were_written(type_v3, values, way):
    schema = one_column(type_v3)
    written = to_arrow_table(schema, [{"c": v} for v in values], "//t")

    assert way(schema, written).equals(written), (way(schema, written).to_pylist(), written.to_pylist())


@pytest.mark.parametrize("type_v3, values", ROUND_TRIPS.values(), ids=ROUND_TRIPS.keys())
def test_a_slice_of_a_column_with_nulls_comes_back(type_v3, values):
    """Arrays with an offset (a slice) and nulls: every converter reads the slice, not the whole buffer."""
    schema = one_column(type_v3)
    nullable = TableSchema.from_yt([{"name": "c", "type_v3": optional(type_v3)}])
    table = to_arrow_table(nullable, [{"c": v} for v in [*values, None, *values]], "//t").slice(1)

    assert as_bytes(nullable, table).equals(table)
    assert as_bytes(schema, table.slice(0, len(values) - 1)).column("c").to_pylist() == values[1:]


def test_many_columns_and_service_columns_come_back_in_their_places():
    schema = TableSchema.from_yt([{"name": "a", "type_v3": "int64"}, {"name": "b", "type_v3": optional("utf8")},
                                  {"name": "c", "type_v3": list_type("double")}])
    table = to_arrow_table(schema, [{"a": i, "b": None if i % 3 else str(i), "c": [i / 2] * (i % 4)}
                                    for i in range(1000)], "//t")
    service = pa.table({"$tablet_index": pa.array([3] * 1000, pa.int64()),
                        "$row_index": pa.array(range(7, 1007), pa.int64())})
    sent_table = pa.Table.from_arrays([*service.columns, *table.columns], names=[*service.column_names, *schema.names])

    back = decode_wire(schema, encode_wire(schema, sent_table), service_columns=True)

    assert back.column_names == ["$tablet_index", "$row_index", "a", "b", "c"]
    assert back.select(schema.names).equals(table)
    assert back.column("$row_index").to_pylist() == list(range(7, 1007))


def test_a_column_missing_from_the_rows_reads_as_null():
    raw = yson.dumps([{"a": 1}, {"a": 2, "b": "x"}], yson_type="list_fragment", yson_format="binary")
    schema = TableSchema.from_yt([{"name": "a", "type_v3": "int64"}, {"name": "b", "type_v3": optional("utf8")}])

    assert decode_wire(schema, raw).to_pylist() == [{"a": 1, "b": None}, {"a": 2, "b": "x"}]


def test_a_value_of_the_wrong_type_names_the_column():
    with pytest.raises(SchemaError, match="column 'c'"):
        read("int64", ["not a number"])


def test_read_values_are_what_from_pylist_takes_for_the_arrow_schema():
    type_v3 = list_type(struct_type(d="date", m=dict_type("utf8", "datetime")))

    assert read(type_v3, [[{"d": 19844, "m": [["k", 1714564801]]}]]) == [
        [{"d": DAY, "m": [("k", WHEN.replace(microsecond=0))]}]]


class TestWireShapes:
    """What goes on the wire, per the YTsaurus docs' YSON representation of each type."""

    def test_dict_is_a_list_of_key_value_pairs_whatever_the_key_type(self):
        assert sent(dict_type("utf8", "int64"), [[("one", 1), ("four", 4)]]) == [[["one", 1], ["four", 4]]]
        assert sent(dict_type("int32", "date"), [[(1, DAY)]]) == [[[1, 19844]]]

    def test_tuple_is_a_positional_list(self):
        assert sent(tuple_type("int64", optional("utf8")), [{"_1": 42, "_2": None}]) == [[42, None]]

    def test_struct_is_a_map_by_member_name(self):
        assert sent(struct_type(Foo="date", Bar=optional("utf8")), [{"Foo": DAY, "Bar": None}]) == [
            {"Foo": 19844, "Bar": None}]

    def test_temporal_values_are_integers_since_the_epoch(self):
        assert sent("date", [DAY]) == [19844]
        assert sent("datetime", [WHEN.replace(microsecond=0)]) == [1714564801]
        assert sent("timestamp", [WHEN]) == [1714564801250000]
        assert read("datetime", [1714564801]) == [WHEN.replace(microsecond=0)]

    def test_datetimes_before_1970_are_floored_to_whole_seconds(self):
        assert sent("datetime64", [dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=dt.UTC)]) == [-1]

    def test_integers_are_typed_by_the_column(self):
        raw = encode_wire(one_column("uint64"), to_arrow_table(one_column("uint64"), [{"c": 5}], "//t"))
        (row,) = yson.loads(raw, yson_type="list_fragment")

        assert isinstance(row["c"], yson.YsonUint64)
        assert sent("int8", [-128, 127]) == [-128, 127]
        assert sent("int64", [-(2**63), 2**63 - 1, 0]) == [-(2**63), 2**63 - 1, 0]
        assert sent("uint64", [2**64 - 1]) == [2**64 - 1]

    def test_optional_of_optional_wraps_a_present_value_in_a_list(self):
        assert sent(optional(optional("int64")), [5, None]) == [[5], None]
        assert read(optional(optional("int64")), [[None], None, [7]]) == [None, None, 7]

    def test_variant_is_its_alternative_and_value(self):
        over_struct = {"type_name": "variant", "members": [{"name": "n", "type": "int64"},
                                                           {"name": "s", "type": "string"}]}
        over_tuple = {"type_name": "variant", "elements": [{"type": "int64"}, {"type": "string"}]}

        assert sent(over_struct, [{"_vn": None, "_vs": "x"}]) == [["s", "x"]]
        assert sent(over_tuple, [{"_v_1": 4, "_v_2": None}]) == [[0, 4]]
        assert read(over_struct, [[1, "by index"], ["n", 3]]) == [{"_vn": None, "_vs": "by index"},
                                                                  {"_vn": 3, "_vs": None}]

    def test_yson_is_sent_as_the_value_and_read_back_as_bytes_with_its_attributes(self):
        assert sent(list_type("yson"), [[b"{a=1}", None]]) == [[{"a": 1}, None]]
        (value,) = read("yson", [yson.loads(b"<x=1>[2]")])

        assert yson.loads(value).attributes == {"x": 1}

    @pytest.mark.parametrize("value", [b"1;\"c\"=2", b"{a=1", b"", b"a=1", b"[1];[2]"])
    def test_a_yson_value_that_is_not_one_node_is_refused_naming_column_and_row(self, value):
        schema = one_column(optional("yson"))
        table = pa.table({"c": pa.array([b"1", value], pa.binary())})

        with pytest.raises(SchemaError, match=r"//t: column 'c': row 1: not a YSON value"):
            encode_wire(schema, table, path="//t")

    def test_values_that_would_split_and_merge_rows_so_the_count_still_matches_are_refused(self):
        """`1;2` adds an item and `[3` + `4]` remove one: a count alone would not see it."""
        table = pa.table({"c": pa.array([b"1;2", b"[3", b"4]"], pa.binary())})

        with pytest.raises(SchemaError, match=r"column 'c': row 0: not a YSON value"):
            encode_wire(one_column("yson"), table)

    def test_yson_values_with_whitespace_attributes_and_binary_tokens_are_embedded_as_they_are(self):
        values = [b" 1 ", b"<a=1>[2;3]", b'"x;y"', b"\n[1]\n", b"\x02\x20", b"{k=#}"]

        assert read("yson", sent("yson", values)) == [yson.dumps(yson.loads(v)) for v in values]

    def test_yson_values_are_written_in_binary_as_a_proxy_writes_them_when_asked(self):
        """The stand-in's rows: binary tokens only, as YTsaurus' writer sends a stored value, whatever its form."""
        values = [b" 1 ", b"<a=1>[2;3]", b'"x;y"', b"\n[1]\n", b"\x02\x20", b"{k=#}"]
        schema = one_column("yson")
        table = to_arrow_table(schema, [{"c": v} for v in values], "//t")

        assert encode_wire(schema, table, binary_yson=True) == b"".join(
            b"{\x01\x02c=" + yson.dumps(yson.loads(v), yson_format="binary") + b"};" for v in values)
        assert decode_wire(schema, encode_wire(schema, table, binary_yson=True)).equals(
            decode_wire(schema, encode_wire(schema, table)))

    def test_strings_with_any_bytes_cross_unchanged(self):
        values = ["", "x" * 10_000, "привет", "\x00;}{#"]

        assert sent("utf8", values) == values
        assert read("utf8", values) == values

    def test_nulls_are_entities(self):
        raw = encode_wire(one_column(optional("double")), pa.table({"c": pa.array([None, 1.5], pa.float64())}))

        assert raw.startswith(b"{\x01\x02c=#};")
        assert list(yson.loads(raw, yson_type="list_fragment"))[1]["c"] == 1.5

    def test_no_rows_is_no_bytes(self):
        assert encode_wire(one_column("int64"), pa.table({"c": pa.array([], pa.int64())})) == b""
        assert decode_wire(one_column("int64"), b"").num_rows == 0

    def test_format_pins_every_representation_and_requires_the_bindings(self):
        assert {k: WIRE_FORMAT.attributes[k] for k in (
            "complex_type_mode", "string_keyed_dict_mode", "decimal_mode", "time_mode", "uuid_mode")} == {
            "complex_type_mode": "named", "string_keyed_dict_mode": "positional", "decimal_mode": "binary",
            "time_mode": "binary", "uuid_mode": "binary"}
        assert WIRE_FORMAT.require_yson_bindings is True
        assert yson.TYPE == "BINARY"


def test_without_the_bindings_the_backend_refuses_to_load_naming_the_package_and_the_cost():
    """A fresh interpreter where `yt_yson_bindings` cannot be imported (as on a platform without its wheel)."""
    code = ("import sys; sys.modules['yt_yson_bindings'] = None\n"
            "from streaming_core.cluster import YsonBindingsError\n"
            "try:\n    import streaming_core.cluster.ytsaurus\n"
            "except YsonBindingsError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout

    assert "ytsaurus-yson" in out and "pip install ytsaurus-yson" in out
    assert "~300x slower" in out


def reference_decimal(value: Decimal, precision: int, scale: int) -> bytes:
    """The binary decimal as the YTsaurus docs describe it, built independently: the unscaled integer in
    32, 64 or 128 bits, big-endian, with its most significant bit inverted."""
    unscaled = int(value.scaleb(scale, context=Context(prec=100)))
    if precision <= 9:
        return struct.pack(">I", (unscaled & 0xFFFFFFFF) ^ (1 << 31))
    if precision <= 18:
        return struct.pack(">Q", (unscaled & 0xFFFFFFFFFFFFFFFF) ^ (1 << 63))
    word = (unscaled & ((1 << 128) - 1)) ^ (1 << 127)
    return struct.pack(">QQ", word >> 64, word & 0xFFFFFFFFFFFFFFFF)


def wire_decimal(value: Decimal, precision: int, scale: int) -> bytes:
    return yson.get_bytes(sent(decimal_type(precision, scale), [value])[0])


def read_decimal(raw: bytes, precision: int, scale: int) -> Decimal:
    return read(decimal_type(precision, scale), [raw])[0]


class TestDecimal:
    def test_the_docs_examples_encode_exactly(self):
        assert wire_decimal(Decimal("3.1415"), 5, 4) == b"\x80\x00\x7a\xb7"
        assert wire_decimal(Decimal("-2.7182"), 5, 4) == b"\x7f\xff\x95\xd2"

    @pytest.mark.parametrize("value, precision, scale", [
        (Decimal("0"), 1, 0), (Decimal("-999999999"), 9, 0), (Decimal("12.5"), 10, 1),
        (Decimal("-123456789012.345678"), 18, 6), (Decimal("1.01"), 19, 2),
        (Decimal("-99999999999999999999999999999999999"), 35, 0),
        (Decimal("0.00000000000000000000000000000000001"), 35, 35),
    ])
    def test_encoding_matches_the_reference_and_decodes_back(self, value, precision, scale):
        raw = wire_decimal(value, precision, scale)

        assert raw == reference_decimal(value, precision, scale)
        assert read_decimal(raw, precision, scale) == value

    def test_byte_order_is_numeric_order(self):
        values = [Decimal(v) for v in ("-10.5", "-0.01", "0", "0.01", "3", "99.99")]

        assert sorted(values, key=lambda v: wire_decimal(v, 18, 2)) == values

    def test_a_value_that_would_lose_digits_is_refused(self):
        with pytest.raises(SchemaError, match=r"row 0, column 'c': .* not of type decimal128\(5, 2\) .*data loss"):
            wire_decimal(Decimal("1.005"), 5, 2)

    def test_a_value_wider_than_its_precision_is_refused(self):
        """Arrow does not check precision when a decimal128 is built from its buffers."""
        too_wide = pa.array([Decimal("12345678901")], pa.decimal128(18, 0)).cast(pa.decimal128(9, 0), safe=False)

        with pytest.raises(SchemaError, match=r"row 0: value .* does not fit decimal\(9, 0\)"):
            encode_wire(one_column(decimal_type(9, 0)), pa.table({"c": too_wide}))

    @pytest.mark.parametrize("raw", [b"\xff\xff\xff\xff", b"\xff\xff\xff\xfe", b"\x00\x00\x00\x02",
                                     b"\xff" * 8, b"\xff" * 7 + b"\xfe", b"\x00" * 7 + b"\x02", b"\x00" * 8],
                             ids=["nan", "+inf", "-inf", "nan 8 bytes", "+inf 8 bytes", "-inf 8 bytes",
                                  "below -inf 8 bytes"])
    def test_special_values_have_no_arrow_decimal(self, raw):
        with pytest.raises(SchemaError, match="nan or infinity"):
            read_decimal(raw, 5 if len(raw) == 4 else 18, 2)

    @pytest.mark.parametrize("raw, value", [(b"\xff" * 7 + b"\xfd", Decimal("92233720368547758.05")),
                                            (b"\x00" * 7 + b"\x03", Decimal("-92233720368547758.05")),
                                            (b"\xff\xff\xff\xfd", Decimal("21474836.45"))])
    def test_the_values_next_to_the_special_ones_are_read(self, raw, value):
        assert read_decimal(raw, 18 if len(raw) == 8 else 9, 2) == value

    def test_a_value_of_the_wrong_width_is_refused(self):
        with pytest.raises(SchemaError, match="row 1: binary decimal\\(18, 2\\) of 4 bytes, expected 8"):
            read(decimal_type(18, 2), [None, b"\x80\x00\x00\x01"])

    def test_decimal_parsed_as_text_is_decoded_from_its_utf8_bytes(self):
        """`WIRE_FORMAT` parses bytes that happen to be valid UTF-8 as `str`: `from_yt_rows` decodes them all
        the same."""
        raw = b"\x7fAAAAAAA"  # a negative decimal(18, 2) whose bytes are all ASCII
        stream = io.BytesIO()
        WIRE_FORMAT.dump_rows([{"c": raw}], stream)
        rows = list(WIRE_FORMAT.load_rows(io.BytesIO(stream.getvalue())))

        assert isinstance(rows[0]["c"], str)
        assert from_yt_rows(one_column(decimal_type(18, 2)), rows).column("c").to_pylist() == [
            read_decimal(raw, 18, 2)]
        assert read_decimal(raw, 18, 2) < 0
