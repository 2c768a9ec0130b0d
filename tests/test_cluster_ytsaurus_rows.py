"""`ytsaurus.rows`: values between Arrow and YTsaurus' YSON rows, type by type.

Round trips go through real YSON bytes: rows are dumped and parsed with the adapter's own `WIRE_FORMAT`
(pure-Python `yt.yson`, as installed), so the converters meet what the parser really returns
(`YsonUnicode`, `YsonEntity`, `YsonStringProxy` for non-UTF-8 bytes, ...). Exact wire shapes are checked
against the representations of the YTsaurus docs ("Data types", section "YSON").
"""

from __future__ import annotations

import datetime as dt
import io
import struct
from decimal import Context, Decimal
from typing import Any

import pyarrow as pa
import pytest
import yt.yson as yson

from streaming_core.cluster import SchemaError, TableSchema
from streaming_core.cluster.schema import to_arrow_table
from streaming_core.cluster.ytsaurus.rows import (
    WIRE_FORMAT,
    decode_decimal,
    encode_decimal,
    from_wire,
    from_yt_rows,
    to_wire,
    to_yt_rows,
)

WHEN = dt.datetime(2024, 5, 1, 12, 0, 1, 250_000, tzinfo=dt.UTC)
DAY = dt.date(2024, 5, 1)


def optional(item: Any) -> dict[str, Any]:
    return {"type_name": "optional", "item": item}


def decimal_type(precision: int, scale: int) -> dict[str, Any]:
    return {"type_name": "decimal", "precision": precision, "scale": scale}


def struct_type(**members: Any) -> dict[str, Any]:
    return {"type_name": "struct", "members": [{"name": n, "type": t} for n, t in members.items()]}


def tuple_type(*elements: Any) -> dict[str, Any]:
    return {"type_name": "tuple", "elements": [{"type": t} for t in elements]}


def dict_type(key: Any, value: Any) -> dict[str, Any]:
    return {"type_name": "dict", "key": key, "value": value}


def list_type(item: Any) -> dict[str, Any]:
    return {"type_name": "list", "item": item}


def over_the_wire(yt_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows as YTsaurus would get and give them back: YSON bytes in `WIRE_FORMAT`, parsed again."""
    stream = io.BytesIO()
    WIRE_FORMAT.dump_rows(yt_rows, stream)
    return list(WIRE_FORMAT.load_rows(io.BytesIO(stream.getvalue())))


def round_trip(type_v3: Any, values: list[Any]) -> tuple[pa.Table, pa.Table]:
    """A one-column table of `values`, and what comes back after writing it to and reading it from YSON."""
    schema = TableSchema.from_yt([{"name": "c", "type_v3": type_v3}])
    table = to_arrow_table(schema, [{"c": v} for v in values], "//t")
    return table, from_yt_rows(schema, over_the_wire(to_yt_rows(schema, table)))


ROUND_TRIPS = {
    "int8": ("int8", [-128, 127]),
    "uint64": ("uint64", [0, 2**64 - 1]),
    "double": ("double", [1.5, -0.0]),
    "float": ("float", [0.25]),
    "bool": ("bool", [True, False]),
    "string": ("string", ["bytes-ish", ""]),
    "utf8": ("utf8", ["привет"]),
    "json": ("json", ['{"a": 1}']),
    "uuid": ("uuid", ["64636261-6665-6867-696a-6b6c6d6e6f70"]),
    "interval": ("interval", [-5]),
    "null": ("null", [None]),
    "yson": ("yson", [yson.dumps({"a": [1, "x"]}), None]),
    "date": ("date", [DAY, dt.date(1970, 1, 1)]),
    "datetime": ("datetime", [WHEN.replace(microsecond=0)]),
    "timestamp": ("timestamp", [WHEN]),
    "decimal 4 bytes": (decimal_type(5, 4), [Decimal("3.1415"), Decimal("-2.7182"), Decimal("0.0000")]),
    "decimal 8 bytes": (decimal_type(18, 2), [Decimal("1234567890123456.78"), Decimal("-0.01")]),
    "decimal 16 bytes": (decimal_type(35, 10), [Decimal("-1234567890123456789012345.0123456789")]),
    "optional": (optional("int64"), [1, None]),
    "optional of optional": (optional(optional("int64")), [1, None]),
    "tagged": ({"type_name": "tagged", "tag": "image/png", "item": "string"}, ["png"]),
    "list": (list_type("int64"), [[1, 2], []]),
    "struct": (struct_type(Foo="int64", Bar=optional("utf8")), [{"Foo": 42, "Bar": None}, {"Foo": -5, "Bar": "x"}]),
    "tuple": (tuple_type("int64", optional("utf8")), [{"_1": 42, "_2": None}]),
    "dict with string keys": (dict_type("utf8", "int64"), [[("one", 1), ("four", 4)], []]),
    "dict with int keys": (dict_type("int32", "string"), [[(1, "one")]]),
    "list of structs": (list_type(struct_type(d="date", ts=optional("timestamp"))),
                        [[{"d": DAY, "ts": WHEN}, {"d": DAY, "ts": None}]]),
    "dict with struct values": (dict_type("utf8", struct_type(amount=decimal_type(10, 2), at="datetime")),
                                [[("a", {"amount": Decimal("12.34"), "at": WHEN.replace(microsecond=0)})]]),
    "optional decimals in a struct": (struct_type(price=optional(decimal_type(9, 3)), qty="int32"),
                                      [{"price": Decimal("1.500"), "qty": 2}, {"price": None, "qty": 0}]),
    "tuple of a dict and a list of dates": (tuple_type(dict_type("int64", optional("yson")), list_type("date")),
                                            [{"_1": [(1, yson.dumps([1])), (2, None)], "_2": [DAY]}]),
    "date32": ("date32", [dt.date(1900, 1, 1)]),
    "datetime64": ("datetime64", [dt.datetime(1900, 1, 1, 0, 0, 1, tzinfo=dt.UTC)]),
    "timestamp64": ("timestamp64", [dt.datetime(1901, 2, 3, 4, 5, 6, 7, tzinfo=dt.UTC)]),
    "interval64": ("interval64", [-(2 ** 40)]),
    "variant over a struct": ({"type_name": "variant", "members": [{"name": "n", "type": "int64"},
                                                                   {"name": "s", "type": "string"}]},
                              [{"_vn": 4, "_vs": None}, {"_vn": None, "_vs": "four"}]),
    "variant over a tuple": ({"type_name": "variant", "elements": [{"type": "int64"}, {"type": "string"}]},
                             [{"_v_1": None, "_v_2": "four"}]),
    "optional list of optional structs": (optional(list_type(optional(struct_type(t=tuple_type("bool"))))),
                                          [[{"t": {"_1": True}}, None], None]),
}


@pytest.mark.parametrize("type_v3, values", ROUND_TRIPS.values(), ids=ROUND_TRIPS.keys())
def test_values_come_back_as_they_were_written(type_v3, values):
    written, read = round_trip(type_v3, values)

    assert read.equals(written), (read.to_pylist(), written.to_pylist())


def test_read_values_are_what_from_pylist_takes_for_the_arrow_schema():
    type_v3 = list_type(struct_type(d="date", m=dict_type("utf8", "datetime")))
    schema = TableSchema.from_yt([{"name": "c", "type_v3": type_v3}])
    wire_rows = over_the_wire([{"c": [{"d": 19844, "m": [["k", 1714564801]]}]}])
    converted = [{"c": from_wire(type_v3)(row["c"])} for row in wire_rows]

    table = pa.Table.from_pylist(converted, schema=schema.arrow_schema())

    assert table.to_pylist() == [{"c": [{"d": DAY, "m": [("k", WHEN.replace(microsecond=0))]}]}]


class TestWireShapes:
    """What goes on the wire, per the YTsaurus docs' YSON representation of each type."""

    def test_dict_is_a_list_of_key_value_pairs_whatever_the_key_type(self):
        assert to_wire(dict_type("utf8", "int64"))([("one", 1), ("four", 4)]) == [["one", 1], ["four", 4]]
        assert to_wire(dict_type("int32", "date"))([(1, DAY)]) == [[1, 19844]]

    def test_tuple_is_a_positional_list(self):
        assert to_wire(tuple_type("int64", optional("utf8")))({"_1": 42, "_2": None}) == [42, None]

    def test_struct_is_a_map_by_member_name(self):
        convert = to_wire(struct_type(Foo="date", Bar=optional("utf8")))

        assert convert({"Foo": DAY, "Bar": None}) == {"Foo": 19844, "Bar": None}

    def test_temporal_values_are_integers_since_the_epoch(self):
        assert to_wire("date")(DAY) == 19844
        assert to_wire("datetime")(WHEN) == 1714564801
        assert to_wire("timestamp")(WHEN) == 1714564801250000

    def test_optional_of_optional_wraps_a_present_value_in_a_list(self):
        assert to_wire(optional(optional("int64")))(5) == [5]
        assert to_wire(optional(optional("int64")))(None) is None
        assert from_wire(optional(optional("int64")))([None]) is None

    def test_yson_is_sent_as_the_value_and_read_back_as_bytes_with_its_attributes(self):
        assert to_wire(list_type("yson"))([b"{a=1}", None]) == [{"a": 1}, None]
        value = yson.loads(b"<x=1>[2]")

        assert yson.loads(from_wire("yson")(value)).attributes == {"x": 1}

    def test_plain_columns_need_no_conversion(self):
        assert to_wire("int64") is None
        assert to_wire(list_type(struct_type(a="utf8", b=optional("double")))) is None

    def test_nulls_pass_through_every_converter(self):
        nullable = optional(struct_type(d=decimal_type(5, 2), t=tuple_type("date")))

        assert to_wire(nullable)(None) is None
        assert from_wire(nullable)(yson.YsonEntity()) is None

    def test_format_pins_every_representation_explicitly(self):
        assert {k: WIRE_FORMAT.attributes[k] for k in (
            "complex_type_mode", "string_keyed_dict_mode", "decimal_mode", "time_mode", "uuid_mode")} == {
            "complex_type_mode": "named", "string_keyed_dict_mode": "positional", "decimal_mode": "binary",
            "time_mode": "binary", "uuid_mode": "text_yql"}
        assert WIRE_FORMAT.require_yson_bindings is False


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


class TestDecimal:
    def test_the_docs_examples_encode_exactly(self):
        assert encode_decimal(Decimal("3.1415"), 5, 4) == b"\x80\x00\x7a\xb7"
        assert encode_decimal(Decimal("-2.7182"), 5, 4) == b"\x7f\xff\x95\xd2"

    @pytest.mark.parametrize("value, precision, scale", [
        (Decimal("0"), 1, 0), (Decimal("-999999999"), 9, 0), (Decimal("12.5"), 10, 1),
        (Decimal("-123456789012.345678"), 18, 6), (Decimal("1.01"), 19, 2),
        (Decimal("-99999999999999999999999999999999999"), 35, 0),
        (Decimal("0.00000000000000000000000000000000001"), 35, 35),
    ])
    def test_encoding_matches_the_reference_and_decodes_back(self, value, precision, scale):
        raw = encode_decimal(value, precision, scale)

        assert raw == reference_decimal(value, precision, scale)
        assert decode_decimal(raw, precision, scale) == value

    def test_byte_order_is_numeric_order(self):
        values = [Decimal(v) for v in ("-10.5", "-0.01", "0", "0.01", "3", "99.99")]

        assert sorted(values, key=lambda v: encode_decimal(v, 18, 2)) == values

    def test_a_value_that_would_lose_digits_is_refused(self):
        with pytest.raises(SchemaError, match=r"does not fit decimal\(5, 2\)"):
            encode_decimal(Decimal("1.005"), 5, 2)

    @pytest.mark.parametrize("raw", [b"\xff\xff\xff\xff", b"\xff\xff\xff\xfe", b"\x00\x00\x00\x02"],
                             ids=["nan", "+inf", "-inf"])
    def test_special_values_have_no_arrow_decimal(self, raw):
        with pytest.raises(SchemaError, match="nan or infinity"):
            decode_decimal(raw, 5, 2)

    def test_a_value_of_the_wrong_width_is_refused(self):
        with pytest.raises(SchemaError, match="of 4 bytes, expected 8"):
            decode_decimal(b"\x80\x00\x00\x01", 18, 2)

    def test_decimal_parsed_as_text_is_decoded_from_its_utf8_bytes(self):
        """The parser gives bytes that happen to be valid UTF-8 as `str`: they must decode all the same."""
        raw = b"\x7fAAAAAAA"  # a negative decimal(18, 2) whose bytes are all ASCII
        (row,) = over_the_wire([{"d": raw}])

        assert isinstance(row["d"], str)
        assert from_wire(decimal_type(18, 2))(row["d"]) == decode_decimal(raw, 18, 2) < 0


def test_a_variant_goes_on_the_wire_as_its_alternative_and_value():
    over_struct = {"type_name": "variant", "members": [{"name": "n", "type": "int64"}, {"name": "s", "type": "string"}]}
    over_tuple = {"type_name": "variant", "elements": [{"type": "int64"}, {"type": "string"}]}
    assert to_wire(over_struct)({"_vn": None, "_vs": "x"}) == ["s", "x"]
    assert to_wire(over_tuple)({"_v_1": 4, "_v_2": None}) == [0, 4]
