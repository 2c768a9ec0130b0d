"""Rows between Arrow and `yt.wrapper`'s YSON rows, for `YtsaurusCluster`: pure functions, no client calls.

How YTsaurus represents a value in YSON depends on the format's attributes; `WIRE_FORMAT` pins every one of
them, so server or client defaults (`tabular_data_format` in the client config) cannot change what we
send or parse. The representations, per column type_v3 (YTsaurus docs, "Data types", section "YSON"):

- `date` / `datetime` / `timestamp`: integers, days / seconds / microseconds since the epoch
  (`time_mode=binary`);
- `decimal(p, s)`: the unscaled integer, big-endian in 4 / 8 / 16 bytes for p up to 9 / 18 / 38, with its
  top bit flipped (`decimal_mode=binary`);
- `struct`: a map from member name to value (`complex_type_mode=named`);
- `tuple`: a list of its elements in order;
- `dict`: a list of `[key, value]` pairs, whatever the key type (`string_keyed_dict_mode=positional`);
- `optional<T>`: `#` for null, else T's value, except that an optional of an optional wraps a present
  value in a one-element list;
- `uuid`: its text form (`uuid_mode=text_yql`), since the Arrow side holds it as a UTF-8 string;
- `yson` / `any`: the YSON value itself, held as YSON-encoded bytes on the Arrow side;
- `tagged<T>`: T's value;
- `variant`: `[name, value]` over a struct, `[index, value]` over a tuple (Arrow: a struct of `_v<name>`);
- `date32` / `datetime64` / `timestamp64` / `interval64`: as their narrow twins, in 64-bit range.

Writes convert the Python values of a conformed Arrow table (`Table.to_pylist()`); reads convert parsed
YSON into values `pa.array` accepts for the column's Arrow type (integers for dates and timestamps).
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import yt.wrapper as yt
import yt.yson as yson

from ..base import ORDERED, NodeInfo, Registration
from ..errors import SchemaError
from ..schema import (
    ROW_INDEX,
    TABLET_INDEX,
    VARIANT_PREFIX,
    TableSchema,
    is_optional,
    to_arrow_table,
    variant_alternatives,
)

#: The YSON format attributes of every row-carrying call; each is the server's default but one
#: (`uuid_mode`), set anyway so that a changed default cannot change the wire representation.
WIRE_FORMAT_ATTRIBUTES = {
    "complex_type_mode": "named",
    "string_keyed_dict_mode": "positional",
    "decimal_mode": "binary",
    "time_mode": "binary",
    "uuid_mode": "text_yql",
}
#: `ytsaurus-client` alone parses YSON in pure Python; `YsonFormat` refuses that unless told not to require
#: the `ytsaurus-yson` bindings, which this project does not depend on.
WIRE_FORMAT = yt.YsonFormat(attributes=WIRE_FORMAT_ATTRIBUTES, require_yson_bindings=False)

Convert = Callable[[Any], Any]

_SERVICE_FIELDS = [
    pa.field(TABLET_INDEX, pa.int64(), nullable=False), pa.field(ROW_INDEX, pa.int64(), nullable=False),
]
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_DAY = dt.date(1970, 1, 1)
_SECOND = dt.timedelta(seconds=1)
_MICROSECOND = dt.timedelta(microseconds=1)
#: Wide enough for any decimal128 value scaled either way without rounding.
_DECIMAL_CONTEXT = decimal.Context(prec=100)


# -- rows -----------------------------------------------------------------------------------------


def to_yt_rows(schema: TableSchema, table: pa.Table) -> list[dict[str, Any]]:
    """Rows of a conformed Arrow table as YSON rows of `WIRE_FORMAT`."""
    columns = [_convert_all(to_wire(c.type_v3), table.column(c.name).to_pylist()) for c in schema.columns]
    return [dict(zip(schema.names, values, strict=True)) for values in zip(*columns, strict=True)]


def _convert_all(convert: Convert | None, values: list[Any]) -> list[Any]:
    return values if convert is None else [convert(v) for v in values]


def from_yt_rows(
    schema: TableSchema, rows: Sequence[Mapping[str, Any]], *, service_columns: bool = False,
) -> pa.Table:
    """YSON rows of `WIRE_FORMAT` as an Arrow table of `schema` (service columns first when asked)."""
    fields = [*(_SERVICE_FIELDS if service_columns else []), *schema.arrow_schema()]
    converters = {c.name: from_wire(c.type_v3) for c in schema.columns}
    arrays = [
        pa.array([converters.get(f.name, plain)(r.get(f.name)) for r in rows], type=f.type) for f in fields
    ]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def plain(value: Any) -> Any:
    """YSON values (`YsonMap`, `YsonEntity`, ...) as plain Python ones, attributes dropped."""
    if isinstance(value, yson.YsonEntity):
        return None
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, bool | yson.YsonBoolean):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value) if isinstance(value, str) else value


# -- values: Python -> wire -----------------------------------------------------------------------


def to_wire(type_v3: Any) -> Convert | None:
    """The converter of one column's Python values (as Arrow gives them) into YSON values, or None when
    they cross unchanged, so that plain columns cost nothing per value. Converters pass nulls through."""
    if isinstance(type_v3, str):
        return _WRITE_SCALARS.get(type_v3)
    name = type_v3["type_name"]
    if name == "tagged" or (name == "optional" and not is_optional(type_v3["item"])):
        return to_wire(type_v3["item"])
    if name == "optional":
        return _nullable(_in_list(to_wire(type_v3["item"])))
    if name == "list":
        return _list_to_wire(to_wire(type_v3["item"]))
    if name == "struct":
        return _struct_to_wire([(m["name"], to_wire(m["type"])) for m in type_v3["members"]])
    if name == "tuple":
        return _tuple_to_wire([to_wire(e["type"]) for e in type_v3["elements"]])
    if name == "dict":
        return _dict_to_wire(to_wire(type_v3["key"]), to_wire(type_v3["value"]))
    if name == "variant":
        return _variant_to_wire([(n, to_wire(t)) for n, t in variant_alternatives(type_v3)], "members" in type_v3)
    if name == "decimal":
        precision, scale = int(type_v3["precision"]), int(type_v3["scale"])
        return _nullable(lambda v: encode_decimal(v, precision, scale))
    return _WRITE_SCALARS.get(name)


def _nullable(convert: Convert) -> Convert:
    return lambda v: None if v is None else convert(v)


def _apply(convert: Convert | None, value: Any) -> Any:
    return value if convert is None else convert(value)


def _in_list(convert: Convert | None) -> Convert:
    """An optional of an optional: a present value travels as a one-element list."""
    return lambda v: [_apply(convert, v)]


def _list_to_wire(item: Convert | None) -> Convert | None:
    return None if item is None else _nullable(lambda v: [item(x) for x in v])


def _struct_to_wire(members: list[tuple[str, Convert | None]]) -> Convert | None:
    if all(convert is None for _, convert in members):
        return None
    return _nullable(lambda v: {name: _apply(convert, v.get(name)) for name, convert in members})


def _tuple_to_wire(elements: list[Convert | None]) -> Convert:
    """Arrow holds a tuple as a struct of `_1`.. `_n`; YTsaurus as a list in element order."""
    return _nullable(lambda v: [_apply(convert, v.get(f"_{i + 1}")) for i, convert in enumerate(elements)])


def _dict_to_wire(key: Convert | None, value: Convert | None) -> Convert:
    """Arrow gives a map as `(key, value)` tuples; YTsaurus takes a list of two-element lists."""
    return _nullable(lambda v: [[_apply(key, k), _apply(value, x)] for k, x in v])


def _variant_to_wire(alternatives: list[tuple[str, Convert | None]], by_name: bool) -> Convert:
    """Arrow holds a variant as a struct with one field set (`_v<name>`); YTsaurus as `[name or index, value]`."""
    def convert(v: dict[str, Any]) -> list[Any]:
        held = next((i for i, (n, _) in enumerate(alternatives) if v.get(VARIANT_PREFIX + n) is not None), 0)
        name, item = alternatives[held]
        return [name if by_name else held, _apply(item, v.get(VARIANT_PREFIX + name))]
    return _nullable(convert)


def _date_days(value: dt.date) -> int:
    return (value - _EPOCH_DAY).days


def _datetime_seconds(value: dt.datetime) -> int:
    return (value - _EPOCH) // _SECOND


def _timestamp_micros(value: dt.datetime) -> int:
    return (value - _EPOCH) // _MICROSECOND


_WRITE_SCALARS: dict[str, Convert] = {
    "date": _nullable(_date_days), "date32": _nullable(_date_days),
    "datetime": _nullable(_datetime_seconds), "datetime64": _nullable(_datetime_seconds),
    "timestamp": _nullable(_timestamp_micros), "timestamp64": _nullable(_timestamp_micros),
    "yson": _nullable(yson.loads),
    "any": _nullable(yson.loads),
}


# -- values: wire -> Python -----------------------------------------------------------------------


def from_wire(type_v3: Any) -> Convert:
    """The converter of one column's parsed YSON values into values `pa.array` accepts for its Arrow type.
    Converters turn YSON nulls (`#`) into None."""
    if isinstance(type_v3, str):
        return _READ_SCALARS.get(type_v3, plain)
    name = type_v3["type_name"]
    if name == "tagged" or (name == "optional" and not is_optional(type_v3["item"])):
        return from_wire(type_v3["item"])
    if name == "optional":
        return _from_list(from_wire(type_v3["item"]))
    if name == "list":
        return _list_from_wire(from_wire(type_v3["item"]))
    if name == "struct":
        return _struct_from_wire([(m["name"], from_wire(m["type"])) for m in type_v3["members"]])
    if name == "tuple":
        return _tuple_from_wire([from_wire(e["type"]) for e in type_v3["elements"]])
    if name == "dict":
        return _dict_from_wire(from_wire(type_v3["key"]), from_wire(type_v3["value"]))
    if name == "variant":
        return _variant_from_wire([(n, from_wire(t)) for n, t in variant_alternatives(type_v3)])
    if name == "decimal":
        precision, scale = int(type_v3["precision"]), int(type_v3["scale"])
        return _non_null(lambda v: decode_decimal(yson.get_bytes(v), precision, scale))
    return _READ_SCALARS.get(name, plain)


def _is_null(value: Any) -> bool:
    return value is None or isinstance(value, yson.YsonEntity)


def _non_null(convert: Convert) -> Convert:
    return lambda v: None if _is_null(v) else convert(v)


def _from_list(convert: Convert) -> Convert:
    """An optional of an optional: Arrow has one null, so an empty inner value (`[#]`) is null too."""
    return _non_null(lambda v: convert(v[0]))


def _list_from_wire(item: Convert) -> Convert:
    return _non_null(lambda v: [item(x) for x in v])


def _struct_from_wire(members: list[tuple[str, Convert]]) -> Convert:
    return _non_null(lambda v: {name: convert(v.get(name)) for name, convert in members})


def _tuple_from_wire(elements: list[Convert]) -> Convert:
    names = [f"_{i + 1}" for i in range(len(elements))]
    return _non_null(lambda v: {n: convert(x) for n, convert, x in zip(names, elements, v, strict=True)})


def _dict_from_wire(key: Convert, value: Convert) -> Convert:
    """Pairs become tuples: `pa.array` takes map entries only as `(key, value)` tuples."""
    return _non_null(lambda v: [(key(k), value(x)) for k, x in v])


def _variant_from_wire(alternatives: list[tuple[str, Convert]]) -> Convert:
    def convert(v: Any) -> dict[str, Any]:
        tag, item = v
        held = alternatives[tag][0] if isinstance(tag, int) else str(tag)
        return {VARIANT_PREFIX + n: convert_item(item) if n == held else None for n, convert_item in alternatives}
    return _non_null(convert)


def _yson_bytes(value: Any) -> bytes:
    """The value as YSON bytes, its attributes kept: a `yson` column holds any YSON, attributes included."""
    return yson.dumps(value)


_READ_SCALARS: dict[str, Convert] = {
    "datetime": _non_null(lambda v: int(v) * 1_000_000),
    "datetime64": _non_null(lambda v: int(v) * 1_000_000),
    "yson": _non_null(_yson_bytes),
    "any": _non_null(_yson_bytes),
    "null": lambda _: None,
    "void": lambda _: None,
}


# -- decimal --------------------------------------------------------------------------------------


def _decimal_width(precision: int) -> int:
    """Bytes of YTsaurus' binary decimal for a precision (only up to decimal128's 38 digits)."""
    for digits, width in ((9, 4), (18, 8), (38, 16)):
        if 1 <= precision <= digits:
            return width
    raise SchemaError(f"decimal precision {precision} is outside 1..38")


def encode_decimal(value: decimal.Decimal, precision: int, scale: int) -> bytes:
    """YTsaurus' binary decimal: the unscaled integer, big-endian, with the sign bit flipped so that byte
    order is numeric order."""
    unscaled = value.scaleb(scale, context=_DECIMAL_CONTEXT)
    if not unscaled.is_finite() or unscaled != unscaled.to_integral_value():
        raise SchemaError(f"value {value} does not fit decimal({precision}, {scale})")
    width = _decimal_width(precision)
    return (int(unscaled) + (1 << (8 * width - 1))).to_bytes(width, "big")


def decode_decimal(raw: bytes, precision: int, scale: int) -> decimal.Decimal:
    """The inverse of `encode_decimal`. YTsaurus' special values (nan, +inf, -inf) have no Arrow decimal
    and raise `SchemaError`."""
    width = _decimal_width(precision)
    if len(raw) != width:
        raise SchemaError(f"binary decimal({precision}, {scale}) of {len(raw)} bytes, expected {width}")
    top = 1 << (8 * width - 1)
    unscaled = int.from_bytes(raw, "big") - top
    if abs(unscaled) >= top - 2:  # INT_MAX is nan, INT_MAX - 1 is +inf, -(INT_MAX - 1) is -inf
        raise SchemaError(f"decimal({precision}, {scale}) nan or infinity has no Arrow representation")
    return decimal.Decimal(unscaled).scaleb(-scale, context=_DECIMAL_CONTEXT)


# -- inserts, batches, keys ------------------------------------------------------------------------


@dataclass(frozen=True)
class PreparedRows:
    """Rows checked and converted for `insert_rows`: the YSON rows to send, and the Arrow table a
    transaction keeps to answer its own lookups."""

    schema: TableSchema
    table: pa.Table
    yt_rows: list[dict[str, Any]]


def prepare_insert(path: str, info: NodeInfo, rows: Any, tablet_index: int | None) -> PreparedRows:
    """Validate and convert rows for `insert_rows` into the table `info` describes; rows of an ordered table
    get their `$tablet_index`. Everything that can be wrong with the rows raises here, before any write."""
    schema = TableSchema.from_yt(info.attributes["schema"])
    rows = as_list_or_table(rows)
    tablets = _tablet_column(rows, len(rows), tablet_index) if info.kind == ORDERED else None
    table = to_arrow_table(schema, rows, path)
    yt_rows = to_yt_rows(schema, table)
    if tablets is not None:
        _place_rows(path, yt_rows, tablets, int(info.attributes.get("tablet_count", 1)))
    return PreparedRows(schema=schema, table=table, yt_rows=yt_rows)


def as_list_or_table(rows: Any) -> list[Mapping[str, Any]] | pa.Table:
    """Rows as a list of mappings or an Arrow table (a record batch becomes a table)."""
    if isinstance(rows, pa.RecordBatch):
        return pa.Table.from_batches([rows])
    return rows if isinstance(rows, pa.Table) else list(rows)


def _tablet_column(
    rows: list[Mapping[str, Any]] | pa.Table, count: int, tablet_index: int | None,
) -> list[int | None]:
    """The tablet of each row: `tablet_index`, else the rows' own `$tablet_index`, else None."""
    if tablet_index is not None:
        return [tablet_index] * count
    if isinstance(rows, pa.Table):
        names = rows.schema.names
        return rows.column(names.index(TABLET_INDEX)).to_pylist() if TABLET_INDEX in names else [None] * count
    return [row.get(TABLET_INDEX) for row in rows]


def _place_rows(path: str, yt_rows: list[dict[str, Any]], tablets: list[int | None], tablet_count: int) -> None:
    """Set `$tablet_index` on every row; rows without one are spread round-robin over the tablets."""
    for i, (row, tablet) in enumerate(zip(yt_rows, tablets, strict=True)):
        tablet = i % tablet_count if tablet is None else int(tablet)
        if not 0 <= tablet < tablet_count:
            raise SchemaError(f"{path}: row {i}: tablet {tablet} out of range, the table has {tablet_count}")
        row[TABLET_INDEX] = tablet


def split_batches(table: pa.Table, max_bytes: int) -> Iterator[pa.RecordBatch]:
    """The table as batches of about `max_bytes` each (at least one row per batch)."""
    rows_per_batch = table.num_rows
    if table.nbytes > max_bytes:
        rows_per_batch = max(1, table.num_rows * max_bytes // table.nbytes)
    yield from table.combine_chunks().to_batches(max_chunksize=max(1, rows_per_batch))


def key_schema(schema: TableSchema, path: str) -> TableSchema:
    """The key columns of a sorted table's schema; `SchemaError` for a table without keys."""
    if not schema.key_columns:
        raise SchemaError(f"{path}: not a sorted table, it has no key columns")
    return TableSchema(tuple(schema.column(k) for k in schema.key_columns))


def sort_key(key_columns: Sequence[str]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """Key order as YTsaurus sorts it: nulls first."""
    return lambda row: tuple((row[k] is not None, row[k]) for k in key_columns)


def registration(row: Mapping[str, Any]) -> Registration:
    """A row of `list_queue_consumer_registrations` (plain values) as a `Registration`."""
    partitions = row.get("partitions")
    return Registration(
        queue_path=str(row["queue_path"]), consumer_path=str(row["consumer_path"]), vital=bool(row["vital"]),
        partitions=None if partitions is None else tuple(int(p) for p in partitions),
    )
