"""Rows between Arrow and the YTsaurus proxy's YSON, for `YtsaurusCluster`: pure functions, no client calls.

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
- `uuid`: its 16 bytes (`uuid_mode=binary`); the Arrow side holds its YQL text form as a UTF-8 string.
  `select_rows`, `lookup_rows` and `pull_*` return the bytes whatever format attributes ask
  (`yt/yt/client/formats/schemaful_writer.cpp`), so the bytes are the one form both ways;
- `yson` / `any`: the YSON value itself, held as YSON-encoded bytes on the Arrow side;
- `tagged<T>`: T's value;
- `variant`: `[name, value]` over a struct, `[index, value]` over a tuple (Arrow: a struct of `_v<name>`);
- `date32` / `datetime64` / `timestamp64` / `interval64`: as their narrow twins, in 64-bit range.

The conversion runs a column at a time (`wire`): `encode_wire` writes a conformed Arrow table as binary
YSON bytes with Arrow kernels and numpy, `decode_wire` reads each column across all rows at once with numpy
(`wire.yson_columns`; bytes it declines go through the `ytsaurus-yson` bindings' objects). With `raw=True`
client calls these bytes are the request and response bodies. `to_yt_rows` / `from_yt_rows` are the same
conversion for calls that take or return Python rows (`raw=False`): the bindings write or parse the bytes in
between.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import yt.wrapper as yt

from ..base import ORDERED, NodeInfo, Registration
from ..errors import SchemaError
from ..schema import TABLET_INDEX, TableSchema, to_arrow_table
from .wire import arrow_insert, decode_wire, dump_rows, encode_wire, load_rows

#: The YSON format attributes of every row-carrying call; each is the server's default, set anyway so that a changed
#: default cannot change the wire representation of what we send.
WIRE_FORMAT_ATTRIBUTES = {
    "complex_type_mode": "named",
    "string_keyed_dict_mode": "positional",
    "decimal_mode": "binary",
    "time_mode": "binary",
    "uuid_mode": "binary",
}
#: Rows are parsed and written by the `ytsaurus-yson` bindings, never by `ytsaurus-client`'s pure-Python
#: YSON (~300x slower): the `wire` package refuses to load without them, and the format requires them too.
WIRE_FORMAT = yt.YsonFormat(attributes=WIRE_FORMAT_ATTRIBUTES, require_yson_bindings=True)


# -- rows -----------------------------------------------------------------------------------------


def to_yt_rows(schema: TableSchema, table: pa.Table) -> list[dict[str, Any]]:
    """Rows of a conformed Arrow table as YSON rows of `WIRE_FORMAT` (Python values, for `raw=False` calls)."""
    return load_rows(encode_wire(schema, table))


def from_yt_rows(
    schema: TableSchema, rows: Sequence[Mapping[str, Any]], *, service_columns: bool = False,
) -> pa.Table:
    """YSON rows of `WIRE_FORMAT` (as `raw=False` calls return them) as an Arrow table of `schema` (service
    columns first when asked). Prefer `decode_wire` on the response bytes of a `raw=True` call."""
    return decode_wire(schema, dump_rows(rows), service_columns=service_columns)


# -- inserts, batches, keys ------------------------------------------------------------------------


@dataclass(frozen=True)
class PreparedRows:
    """Rows checked and converted for `insert_rows`: what is sent (`sent`: the write schema's columns, without the
    system columns the cluster fills nor computed ones, and with `$tablet_index` for an ordered table), as binary
    YSON (`wire`) or as the `arrow` input format (`arrow`, where `arrow_ok`), and the Arrow table a transaction
    keeps to answer its own lookups."""

    path: str
    schema: TableSchema
    table: pa.Table
    sent: pa.Table

    @cached_property
    def wire(self) -> bytes:
        return encode_wire(self.schema, self.sent, path=self.path)

    @property
    def arrow_ok(self) -> bool:
        return arrow_insert.supported(self.schema)

    def arrow(self) -> bytes:
        return arrow_insert.encode(self.schema, self.sent, path=self.path)


def prepare_insert(path: str, info: NodeInfo, rows: Any, tablet_index: int | None) -> PreparedRows:
    """Validate and convert rows for `insert_rows` into the table `info` describes; rows of an ordered table
    get their `$tablet_index`. Everything that can be wrong with the rows raises here, before any write."""
    schema = TableSchema.from_yt(info.attributes["schema"])
    rows = as_list_or_table(rows)
    tablets = _tablet_column(rows, len(rows), tablet_index) if info.kind == ORDERED else None
    table = to_arrow_table(schema, rows, path)
    sent = table.select(schema.writable().names)  # YTsaurus parses inserts against the write schema
    if tablets is not None:
        placed = _place_rows(path, tablets, int(info.attributes.get("tablet_count", 1)))
        sent = sent.add_column(0, TABLET_INDEX, placed)
    return PreparedRows(path=path, schema=schema, table=table, sent=sent)


def as_list_or_table(rows: Any) -> list[Mapping[str, Any]] | pa.Table:
    """Rows as a list of mappings or an Arrow table (a record batch becomes a table)."""
    if isinstance(rows, pa.RecordBatch):
        return pa.Table.from_batches([rows])
    return rows if isinstance(rows, pa.Table) else list(rows)


def _tablet_column(rows: list[Mapping[str, Any]] | pa.Table, count: int, tablet_index: int | None) -> pa.Array:
    """The tablet of each row: `tablet_index`, else the rows' own `$tablet_index`, else null."""
    if tablet_index is not None:
        return pa.repeat(pa.scalar(tablet_index, pa.int64()), count)
    if isinstance(rows, pa.Table):
        if TABLET_INDEX not in rows.schema.names:
            return pa.nulls(count, pa.int64())
        return _as_tablets(rows.column(TABLET_INDEX).combine_chunks())
    return _as_tablets(pa.array([row.get(TABLET_INDEX) for row in rows]))


def _as_tablets(values: pa.Array) -> pa.Array:
    try:
        return values.cast(pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise SchemaError(f"{TABLET_INDEX} must hold tablet numbers: {e}") from None


def _place_rows(path: str, tablets: pa.Array, tablet_count: int) -> pa.Array:
    """Every row's `$tablet_index`; rows without one are spread round-robin over the tablets."""
    spread = np.arange(len(tablets), dtype=np.int64) % tablet_count
    placed = pc.if_else(tablets.is_valid(), tablets, pa.array(spread)) if tablets.null_count else tablets
    numbers = placed.to_numpy(zero_copy_only=False)
    outside = (numbers < 0) | (numbers >= tablet_count)
    if outside.any():
        row = int(np.argmax(outside))
        raise SchemaError(f"{path}: row {row}: tablet {numbers[row]} out of range, the table has {tablet_count}")
    return placed


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
