"""Every YT type the connector supports, with JSON values as `opsd queue produce` takes them and as
`opsd table read --json` prints them back (the canonical form), shared by the CLI and Spark round trips."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class YtType:
    """One column type and its values: `(JSON input, canonical JSON output)` pairs."""

    id: str
    type_v3: Any
    values: tuple[tuple[Any, Any], ...]

    @property
    def column(self) -> str:
        return f"c_{self.id}"


def _same(*values: Any) -> tuple[tuple[Any, Any], ...]:
    return tuple((v, v) for v in values)


_POINT = {"type_name": "struct", "members": [{"name": "x", "type": "int64"},
                                             {"name": "label", "type": {"type_name": "optional", "item": "string"}}]}

TYPES = [
    YtType("int8", "int8", _same(-128, 127)),
    YtType("int16", "int16", _same(-32768, 32767)),
    YtType("int32", "int32", _same(-(2 ** 31), 2 ** 31 - 1)),
    YtType("int64", "int64", _same(-(2 ** 63), 2 ** 63 - 1)),
    YtType("uint8", "uint8", _same(0, 255)),
    YtType("uint16", "uint16", _same(0, 65535)),
    YtType("uint32", "uint32", _same(0, 2 ** 32 - 1)),
    YtType("uint64", "uint64", _same(0, 2 ** 63 - 1)),
    YtType("float", "float", _same(1.5, -0.25)),
    YtType("double", "double", _same(3.141592653589793, -1e300)),
    YtType("bool", "bool", _same(True, False)),
    YtType("string", "string", _same("", "héllo")),
    YtType("utf8", "utf8", _same("ünïcode ✓")),
    YtType("date", "date", (("2024-05-06", "2024-05-06"), (0, "1970-01-01"))),
    YtType("datetime", "datetime", (("2024-05-06T07:08:09+00:00", "2024-05-06T07:08:09+00:00"),
                                    (86400, "1970-01-02T00:00:00+00:00"))),
    YtType("timestamp", "timestamp", (("2024-05-06T07:08:09.123456+00:00", "2024-05-06T07:08:09.123456+00:00"),
                                      (1, "1970-01-01T00:00:00.000001+00:00"))),
    YtType("interval", "interval", _same(-5, 86_400_000_000)),
    YtType("date32", "date32", (("1900-01-01", "1900-01-01"), (-1, "1969-12-31"))),
    YtType("datetime64", "datetime64", (("1900-01-01T00:00:01+00:00", "1900-01-01T00:00:01+00:00"),)),
    YtType("timestamp64", "timestamp64", (("1901-02-03T04:05:06.000007+00:00", "1901-02-03T04:05:06.000007+00:00"),)),
    YtType("interval64", "interval64", _same(-(2 ** 40), 7)),
    YtType("json", "json", (('{"a": [1, 2]}', '{"a": [1, 2]}'), ({"b": 1}, '{"b": 1}'))),
    YtType("uuid", "uuid", _same("01234567-89ab-cdef-0123-456789abcdef")),
    YtType("yson", "yson", _same({"k": [1, "x", None]}, 5)),
    YtType("decimal", {"type_name": "decimal", "precision": 10, "scale": 2}, (("12.34", "12.34"), (-0.5, "-0.50"))),
    YtType("optional", {"type_name": "optional", "item": "int64"}, _same(7, None)),
    YtType("list", {"type_name": "list", "item": "string"}, _same(["a", "b"], [])),
    YtType("struct", _POINT, (({"x": 3, "label": "p"}, {"x": 3, "label": "p"}),
                              ({"x": -1}, {"x": -1, "label": None}))),
    YtType("tuple", {"type_name": "tuple", "elements": [{"type": "int64"}, {"type": "string"}]},
           (([1, "a"], [1, "a"]), ({"_1": 2, "_2": "b"}, [2, "b"]))),
    YtType("dict", {"type_name": "dict", "key": "string", "value": "int64"},
           (([["k", 1], ["l", 2]], [["k", 1], ["l", 2]]), ({"m": 3}, [["m", 3]]), ([], []))),
    YtType("variant_struct", {"type_name": "variant", "members": [{"name": "num", "type": "int64"},
                                                                  {"name": "text", "type": "string"}]},
           _same(["num", 4], ["text", "four"])),
    YtType("variant_tuple", {"type_name": "variant", "elements": [{"type": "int64"}, {"type": "string"}]},
           _same([0, 4], [1, "four"])),
    YtType("tagged", {"type_name": "tagged", "tag": "image/png", "item": "string"}, _same("png")),
]
