"""Rows for `insert_rows` in the `arrow` input format: an Arrow IPC stream, as the proxy's Arrow parser
takes it (`yt/yt/library/formats/arrow_parser.cpp`; see docs/wire_formats.md).

`insert_rows` (and `lookup_rows`' keys) accept `arrow` as input; no row-returning command of the HTTP API
(`select_rows`, `lookup_rows`, `pull_queue`, `pull_consumer`) writes it, so reads stay YSON. The parser
matches columns by name and checks each Arrow type against the column's YT type; the types it takes
differ from this project's Arrow representation for dates (`date`, `datetime`, `timestamp` only as
unsigned integers of days, seconds, microseconds) and it refuses the wide date types. Composite columns
arrive positionally (a struct's fields in schema order, whatever their names). Only the types whose
mapping the parser's source settles are sent this way (`supported`); a schema with any other type is
written as YSON.

`encode` is the client's side; `decode` is what the proxy makes of the bytes (for the HTTP stand-in).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ...errors import SchemaError
from ...schema import TABLET_INDEX, TableSchema, is_optional
from .yson_encode import encoder as yson_encoder

_MICROS_PER_SECOND = 1_000_000
_INTS = ("int8", "int16", "int32", "int64", "interval")
_UINTS = ("uint8", "uint16", "uint32", "uint64")
_FLOATS = ("float", "double")
_TEXT = ("string", "utf8", "json")
#: Scalars that travel as themselves (Arrow type as this project holds them), inside composites too.
_PLAIN = frozenset((*_INTS, *_UINTS, *_FLOATS, *_TEXT, "bool", "boolean"))
_NULL = ("null", "void")


def _non_negative(micros: pa.Array) -> pa.Array:
    """Whole seconds of non-negative microseconds (unsigned on the wire: earlier values are refused)."""
    if micros.null_count < len(micros) and pc.min(micros).as_py() < 0:
        raise pa.ArrowInvalid("negative value")
    return pc.divide(micros, _MICROS_PER_SECOND)


#: Top-level scalars that travel converted, to the unsigned integers the parser takes for them.
_CONVERTED: dict[str, Callable[[pa.Array], pa.Array]] = {
    "date": lambda a: a.cast(pa.int32()).cast(pa.uint32()),
    "datetime": lambda a: _non_negative(a.cast(pa.int64())).cast(pa.uint32()),
    "timestamp": lambda a: a.cast(pa.int64()).cast(pa.uint64()),
}
_YSON = ("yson", "any")


def _unwrapped(type_v3: Any) -> Any:
    """The type without `tagged` and single `optional` wrappers (nullability is the field's)."""
    while isinstance(type_v3, dict) and (type_v3["type_name"] == "tagged" or (
            type_v3["type_name"] == "optional" and not is_optional(type_v3["item"]))):
        type_v3 = type_v3["item"]
    return type_v3


def _name(type_v3: Any) -> str:
    return type_v3 if isinstance(type_v3, str) else type_v3["type_name"]


def _plain_composite(type_v3: Any) -> bool:
    """Lists, structs and dicts of plain scalars: the parser writes them as positional YSON itself."""
    type_v3 = _unwrapped(type_v3)
    name = _name(type_v3)
    if name in _PLAIN:
        return True
    if name == "list":
        return _plain_composite(type_v3["item"])
    if name == "struct":
        return all(_plain_composite(m["type"]) for m in type_v3["members"])
    if name == "dict":
        return _plain_composite(type_v3["key"]) and _plain_composite(type_v3["value"])
    return False


def _column_supported(type_v3: Any) -> bool:
    name = _name(_unwrapped(type_v3))
    return name in _CONVERTED or name in _NULL or name in _YSON or name == "decimal" or _plain_composite(type_v3)


def supported(schema: TableSchema) -> bool:
    """Whether every column of the schema can be sent in the `arrow` format."""
    return all(_column_supported(c.type_v3) for c in schema.columns)


def _wire_column(type_v3: Any, values: pa.Array, where: str) -> pa.Array:
    name = _name(_unwrapped(type_v3))
    if name in _CONVERTED:
        try:
            return _CONVERTED[name](values)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise SchemaError(f"{where}: a {name} before 1970 cannot be sent as YTsaurus' unsigned {name}: "
                              f"{e}") from None
    if name in _YSON:
        yson_encoder(name, where)(values)  # each value checked to be one YSON node
        return values
    return values


def encode(schema: TableSchema, table: pa.Table, *, path: str = "") -> bytes:
    """The IPC stream of a conformed table (service columns such as `$tablet_index` included as they are)."""
    if not supported(schema):
        unsupported = [c.name for c in schema.columns if not _column_supported(c.type_v3)]
        raise SchemaError(f"{path}: columns {unsupported} have types the arrow input format does not carry")
    arrays, fields = [], []
    for name in table.column_names:
        values = table.column(name).combine_chunks()
        if not name.startswith("$"):
            values = _wire_column(schema.column(name).type_v3, values, f"{path}: column {name!r}")
        arrays.append(values)
        fields.append(pa.field(name, values.type))
    batch = pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def decode(schema: TableSchema, raw: bytes, *, path: str = "") -> pa.Table:
    """What the proxy reads from `arrow` input: one or several concatenated IPC streams, columns matched by
    name against the write schema (`TableSchema.writable`), as a table of its Arrow types (a missing column is
    null, `$tablet_index` kept). As YTsaurus' Arrow parser does, a column the write schema lacks is dropped
    silently (`$timestamp`, a computed column, an unknown name), where YSON input is refused."""
    batches = []
    reader = pa.BufferReader(raw)
    while reader.tell() < len(raw):
        try:
            stream = pa.ipc.open_stream(reader)
            batches += [b for b in stream]
        except pa.ArrowInvalid as e:
            raise SchemaError(f"{path}: arrow input is not an IPC stream: {e}") from None
    service = sorted({n for b in batches for n in b.schema.names if n == TABLET_INDEX})
    fields = [*(pa.field(n, pa.int64(), nullable=False) for n in service), *schema.writable().arrow_schema()]
    tables = [pa.Table.from_arrays([_from_wire(schema, b, f, path) for f in fields], schema=pa.schema(fields))
              for b in batches]
    return pa.concat_tables(tables) if tables else schema.arrow_schema().empty_table()


def _from_wire(schema: TableSchema, batch: pa.RecordBatch, field: pa.Field, path: str) -> pa.Array:
    where = f"{path}: column {field.name!r}"
    if field.name not in batch.schema.names:
        return pa.nulls(batch.num_rows, field.type)
    values = batch.column(field.name)
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if field.name.startswith("$"):
        return values.cast(pa.int64())
    type_v3 = _unwrapped(schema.column(field.name).type_v3)
    name = _name(type_v3)
    if name in _CONVERTED:
        return _from_unsigned(name, values, field.type, where)
    try:
        return _positional(values, field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise SchemaError(f"{where}: unexpected arrow type {values.type} for YT type {name}: {e}") from None


def _from_unsigned(name: str, values: pa.Array, target: pa.DataType, where: str) -> pa.Array:
    if not pa.types.is_unsigned_integer(values.type):
        raise SchemaError(f"{where}: unexpected arrow type {values.type} for YT type {name} (unsigned integers only)")
    if name == "date":
        return values.cast(pa.int32()).cast(target)
    micros = values.cast(pa.int64())
    if name == "datetime":
        micros = pc.multiply_checked(micros, _MICROS_PER_SECOND)
    return micros.cast(target)


def _positional(values: pa.Array, target: pa.DataType) -> pa.Array:
    """`values` as `target`, struct fields matched by position (the parser ignores their names)."""
    if pa.types.is_struct(target) and pa.types.is_struct(values.type):
        children = [_positional(values.field(i), target.field(i).type) for i in range(target.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=values.is_null() if values.null_count
                                          else None)
    if pa.types.is_list(target) and pa.types.is_list(values.type):
        items = _positional(values.values, target.value_type)
        return pa.ListArray.from_arrays(values.offsets, items, type=target,
                                        mask=values.is_null() if values.null_count else None)
    return values.cast(target)

