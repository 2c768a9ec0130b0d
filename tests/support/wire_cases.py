"""Column types with values that cross the YTsaurus wire (`encode_wire` / `decode_wire`), shared by the wire's
tests: type builders, `ROUND_TRIPS` (one case per representation, Arrow-side values) and `wide_rows` (a row of
every kind at once, with edge values and nulls)."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import yt.yson as yson

from streaming_core.cluster import TableSchema

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


def one_column(type_v3: Any) -> TableSchema:
    return TableSchema.from_yt([{"name": "c", "type_v3": type_v3}])


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


#: A wide row: 24 columns of every kind the backend maps (the shape of `bench.wire`'s `wide`, with more edges).
WIDE = [
    {"name": "k", "type_v3": "int64"}, {"name": "u", "type_v3": "uint64"}, {"name": "i8", "type_v3": optional("int8")},
    {"name": "d", "type_v3": optional("double")}, {"name": "f", "type_v3": "float"},
    {"name": "b", "type_v3": optional("bool")}, {"name": "s", "type_v3": optional("string")},
    {"name": "name", "type_v3": "utf8"}, {"name": "day", "type_v3": "date"}, {"name": "old", "type_v3": "date32"},
    {"name": "at", "type_v3": optional("datetime")}, {"name": "ts", "type_v3": "timestamp"},
    {"name": "iv", "type_v3": "interval"}, {"name": "price", "type_v3": decimal_type(18, 4)},
    {"name": "big", "type_v3": optional(decimal_type(35, 3))}, {"name": "meta", "type_v3": optional("yson")},
    {"name": "tags", "type_v3": optional(list_type("utf8"))},
    {"name": "point", "type_v3": struct_type(x="double", label=optional("utf8"))},
    {"name": "counts", "type_v3": dict_type("utf8", "int64")},
    {"name": "pair", "type_v3": tuple_type("int32", "string")},
    {"name": "either", "type_v3": {"type_name": "variant", "members": [{"name": "n", "type": "int64"},
                                                                       {"name": "t", "type": "utf8"}]}},
    {"name": "which", "type_v3": optional({"type_name": "variant", "elements": [{"type": "bool"},
                                                                                {"type": list_type("int16")}]})},
    {"name": "maybe", "type_v3": optional(optional("int32"))}, {"name": "id", "type_v3": optional("uuid")},
]
_EPOCH = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
_METAS = [b"{source=bench;n=1}", b"<a=1;b=[x;2u]>%true", b"[1;-2.5;#;{}]", b'"\\x00\\n\\"q"', b"#", b"123456789012u"]


def wide_rows(count: int) -> list[dict[str, Any]]:
    """`count` rows of `WIDE`: extremes of each range, nulls, empty and non-ASCII strings, every alternative."""
    rows = []
    for i in range(count):
        rows.append({
            "k": [-(2**63), 2**63 - 1, i][i % 3], "u": [0, 2**64 - 1, 2**63 + i][i % 3],
            "i8": None if i % 4 == 0 else [-128, 127, i % 100][i % 3],
            "d": [None, float("nan"), float("-inf"), -0.0, i / 3][i % 5], "f": i / 4,
            "b": None if i % 7 == 0 else i % 2 == 0, "s": [None, "", "é" * (i % 9), "x;}{#"][i % 4],
            "name": f"имя-{i}", "day": dt.date(2024, 1, 1) + dt.timedelta(i % 365),
            "old": dt.date(1900, 1, 1) + dt.timedelta(i),
            "at": None if i % 4 == 0 else _EPOCH + dt.timedelta(seconds=i),
            "ts": _EPOCH + dt.timedelta(microseconds=i), "iv": -i * 1_000_003,
            "price": Decimal(i) / 10_000 - 5, "big": None if i % 3 else Decimal(f"-{i}12345678901234567890.125"),
            "meta": None if i % 5 == 4 else _METAS[i % len(_METAS)],
            "tags": None if i % 6 == 5 else [f"t{j}" for j in range(i % 4)],
            "point": {"x": i / 2, "label": None if i % 2 else f"p{i}"},
            "counts": [("a", i), ("b", -i)][: i % 3], "pair": {"_1": i % 1000, "_2": f"e{i}"},
            "either": {"_vn": i, "_vt": None} if i % 2 else {"_vn": None, "_vt": f"v{i}"},
            "which": [None, {"_v_1": i % 2 == 0, "_v_2": None}, {"_v_1": None, "_v_2": list(range(i % 5))}][i % 3],
            "maybe": None if i % 6 == 0 else i % 100, "id": None if i % 8 == 0 else str(uuid.UUID(int=i * 2**70 + i)),
        })
    return rows


def wide_schema() -> TableSchema:
    return TableSchema.from_yt(WIDE)
