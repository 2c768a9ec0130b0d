"""Rows on the wire between Arrow and the YTsaurus HTTP proxy, a column at a time (docs/wire_formats.md).

What the HTTP API carries for the row commands this backend uses (from the proxy's driver sources):
- `select_rows`, `lookup_rows`, `pull_queue`, `pull_consumer`: output in YSON (or JSON, schemaful DSV,
  web JSON) only: the driver writes rowsets through `CreateSchemafulWriterForFormat`, which has no Arrow or
  skiff writer. Reads are therefore YSON, decoded here by `decode_wire`: every column across all rows at once
  with numpy (`yson_columns`), or through the bindings' objects (`yson_decode`) for bytes not laid out as the
  proxy's schemaful writer lays them out.
- `insert_rows` (and `lookup_rows`' key input): any input format the driver's parsers take, Arrow and
  skiff included. `encode_wire` writes YSON; `arrow_insert.encode` the Arrow IPC stream the proxy's Arrow
  parser takes, for the schemas whose types that parser settles (`arrow_insert.supported`).

Every function here is the pair of the other side's: `decode_wire` reads what `encode_wire` writes (the
client reads what the proxy, or the HTTP stand-in, writes, and the stand-in reads what the client sends),
and `arrow_insert.decode` reads `arrow_insert.encode`. Importing this package fails with
`YsonBindingsError` where the `ytsaurus-yson` bindings cannot be loaded (`bindings`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from ....log import get_logger
from ...errors import SchemaError
from ...schema import ROW_INDEX, TABLET_INDEX, TableSchema
from ...timing import DECODE
from . import arrow_insert, bindings, yson_columns
from .yson_decode import column, decoder, parse_rows
from .yson_encode import encode_rows, encoder

log = get_logger(__name__)

#: The service columns `pull_consumer` / `select_rows` return first when asked (`service_columns=True`).
SERVICE_COLUMNS = (TABLET_INDEX, ROW_INDEX)


def _service_fields(service_columns: bool | Sequence[str]) -> list[pa.Field]:
    names = SERVICE_COLUMNS if service_columns is True else (service_columns or ())
    return [pa.field(n, pa.int64(), nullable=False) for n in names]


@DECODE.timed
def decode_wire(schema: TableSchema, raw: bytes, *, service_columns: bool | Sequence[str] = False) -> pa.Table:
    """Binary YSON rows (a list fragment, as `select_rows` / `pull_consumer` / `lookup_rows` return them in
    `WIRE_FORMAT`) as an Arrow table of `schema`'s columns, service columns first when asked (True: both
    `$tablet_index` and `$row_index`; or a sequence of names). A column a row lacks is null.

    Read column by column with numpy (`yson_columns`); bytes it declines go through the bindings' objects
    (`decode_objects`), which give the same table and name a value at fault."""
    fields = [*_service_fields(service_columns), *schema.arrow_schema()]
    types = {c.name: c.type_v3 for c in schema.columns}
    columns = [(f.name, types.get(f.name, "int64"), f.type) for f in fields]
    try:
        return pa.Table.from_arrays(yson_columns.decode_columns(raw, columns), schema=pa.schema(fields))
    except yson_columns.Declined as declined:
        log.debug("wire_rows_read_through_objects", reason=str(declined), bytes=len(raw))
        return decode_objects(raw, fields, types)


def decode_objects(raw: bytes, fields: Sequence[pa.Field], types: dict[str, object]) -> pa.Table:
    """The `fields` (of YT types `types`, int64 where absent) of binary or text YSON rows, through the bindings'
    Python objects."""
    rows = parse_rows(raw)
    arrays = []
    for f in fields:
        decode = decoder(types.get(f.name, "int64"), f.type, f"column {f.name!r}")
        try:
            arrays.append(decode(column(rows, f.name)))
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise SchemaError(f"column {f.name!r}: a value read does not have the column's YSON form "
                              f"({type(e).__name__}: {e})") from None
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def encode_wire(schema: TableSchema, table: pa.Table, *, path: str = "", binary_yson: bool = False) -> bytes:
    """A table conformed to `schema` (`to_arrow_table`) as binary YSON rows in `WIRE_FORMAT`: what
    `insert_rows`, `delete_rows`, `lookup_rows` and `write_table` take, and what the row-returning commands
    send. Columns go in the table's order; service columns (`$tablet_index`, ...) as integers. `yson` values are
    embedded as the Arrow side holds them (text or binary), or, `binary_yson`, written in binary as a proxy writes
    them (the stand-in's rows; ~1.5 µs a value more)."""
    prefix = f"{path}: " if path else ""
    columns = []
    for name in table.column_names:
        values = table.column(name).combine_chunks()
        if name.startswith("$"):
            encode = encoder("uint64" if pa.types.is_unsigned_integer(values.type) else "int64", name)
        else:
            encode = encoder(schema.column(name).type_v3, f"{prefix}column {name!r}", binary_yson=binary_yson)
        columns.append((name, values, encode))
    return encode_rows(columns, table.num_rows)


def load_rows(raw: bytes) -> list[dict[str, object]]:
    """Binary YSON rows as Python dicts (str keys), the form `yt.wrapper` calls with `raw=False` take."""
    return list(bindings.loads(raw, yson_type="list_fragment", always_create_attributes=False))


def dump_rows(rows: Sequence[object]) -> bytes:
    """Python rows (as `yt.wrapper` returns them with `raw=False`) as binary YSON rows."""
    return bindings.dumps(list(rows), yson_type="list_fragment", yson_format="binary")


__all__ = ["SERVICE_COLUMNS", "arrow_insert", "decode_objects", "decode_wire", "dump_rows", "encode_wire", "load_rows"]
