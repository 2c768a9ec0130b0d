"""What every command group shares: the descriptor and result types, and the parameter helpers."""


from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from streaming_core.cluster.errors import ClusterError
from streaming_core.cluster.schema import TABLET_INDEX, TIMESTAMP, TableSchema
from streaming_core.cluster.yson_values import plain
from streaming_core.cluster.ytsaurus.rows import WIRE_FORMAT_ATTRIBUTES, from_yt_rows, to_yt_rows

from .. import query as ql
from ..errors import NO_SUCH_TRANSACTION, SCHEMA_VIOLATION, BadRequest, YtCodedError

Rows = list[dict[str, Any]]


@dataclass(frozen=True)
class Descriptor:
    """What `/api/v4` says of a command (`yt.wrapper.command.Command`)."""

    name: str
    input_type: str | None = None
    output_type: str = "structured"
    is_volatile: bool = False
    is_heavy: bool = False

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "input_type": self.input_type or "null", "output_type": self.output_type,
                "is_volatile": self.is_volatile, "is_heavy": self.is_heavy}


@dataclass(frozen=True)
class Rowset:
    """Rows as Arrow tables of `schema`'s columns (service columns such as `$row_index` first, where they come),
    written to the wire a column at a time (`encode_wire`)."""

    schema: TableSchema
    tables: Iterable[pa.Table]


@dataclass(frozen=True)
class Tabular:
    """Rows with the response parameters (`X-YT-Response-Parameters`) that go with them."""

    rows: Iterable[Any]
    parameters: dict[str, Any]


@dataclass
class PendingTransaction:
    """A transaction the proxy holds between calls: its kind, parent and the writes it applies at commit; a master
    transaction's `timeout` (seconds since its last ping, None: never expires), `deadline` (on the stand-in's clock)
    and the attributes it was started with (`title`)."""

    id: str
    kind: str
    parent: str | None
    writes: list[Callable[[Any], None]] = field(default_factory=list)
    timeout: float | None = None
    deadline: float = float("inf")
    attributes: dict[str, Any] = field(default_factory=dict)



_NULL_TRANSACTION = "0-0-0-0"
_ids = itertools.count(1)


#: YTsaurus object types that ids carry (the low 16 bits of their third part): clients branch on them.
MASTER_TRANSACTION, TABLET_TRANSACTION, NESTED_TRANSACTION, MAP_NODE_TYPE = 1, 2, 4, 303


def new_id(object_type: int = MAP_NODE_TYPE) -> str:
    return f"{next(_ids):x}-{uuid.uuid4().hex[:8]}-{0x3fe << 16 | object_type:x}-{uuid.uuid4().hex[:8]}"


def v4_value(p: Mapping[str, Any], value: Any) -> Any:
    """A v4 result: the value itself when the caller asked `return_only_value`, else `{"value": ...}`."""
    return value if p.get("return_only_value") else {"value": value}


def transaction_id_of(p: Mapping[str, Any], key: str = "transaction_id") -> str | None:
    value = p.get(key)
    return None if value is None or str(value) == _NULL_TRANSACTION else str(value)


def no_such_transaction(tx_id: str | None) -> ClusterError:
    return YtCodedError(NO_SUCH_TRANSACTION, f"No such transaction {tx_id}")


def path_of(p: Mapping[str, Any]) -> str:
    if "path" not in p:
        raise BadRequest("parameter 'path' is required")
    return str(p["path"])


def attributes_of(value: Any) -> dict[str, Any]:
    return plain(getattr(value, "attributes", None) or {})


def key_schema(schema: TableSchema) -> TableSchema:
    return TableSchema(tuple(c for c in schema.columns if c.sort_order))


def wire_rows(schema: TableSchema, table: pa.Table) -> Rows:
    return to_yt_rows(schema, table.select(schema.names))


def input_table(schema: TableSchema, rows: Rows | pa.Table) -> pa.Table:
    """Rows a command took (parsed YSON rows, or an Arrow table the `arrow` input format gave) as Arrow."""
    if isinstance(rows, pa.Table):
        return rows
    service = [name for name in (TABLET_INDEX,) if rows and name in rows[0]]
    table = from_yt_rows(schema, rows)
    if service:
        table = table.add_column(0, TABLET_INDEX, pa.array([int(r[TABLET_INDEX]) for r in rows], pa.int64()))
    return table


def check_write_schema(schema: TableSchema, rows: Rows, *, ordered: bool) -> None:
    """Refuse rows with a column the write schema lacks (`TTableSchema::ToWrite`), as YTsaurus' table consumer
    refuses them: `SCHEMA_VIOLATION`, "No column ... in table schema". An ordered table's rows may name their
    `$tablet_index`."""
    allowed = {*schema.writable().names, *((TABLET_INDEX,) if ordered else ())}
    unknown = sorted(set().union(*rows) - allowed)
    if unknown:
        raise YtCodedError(SCHEMA_VIOLATION, f"No column {unknown[0]!r} in table schema")


#: A YTsaurus timestamp's bits below the unix seconds (`yt/yt/client/transaction_client/helpers.h`).
TIMESTAMP_COUNTER_BITS = 30
_MICROS_PER_SECOND = 1_000_000


def hybrid_timestamps(table: pa.Table) -> pa.Table:
    """The table with `$timestamp` as YTsaurus serves it, a hybrid commit timestamp (unix seconds << 30 | a counter),
    from the embedded storage's microseconds (the counter: the microseconds within the second, so order is kept)."""
    if TIMESTAMP not in table.column_names:
        return table
    index = table.column_names.index(TIMESTAMP)
    micros = table.column(index).cast(pa.int64())
    seconds = pc.shift_left(pc.divide(micros, _MICROS_PER_SECOND), TIMESTAMP_COUNTER_BITS)
    hybrid = pc.bit_wise_or(seconds, pc.subtract(micros, pc.multiply(pc.divide(micros, _MICROS_PER_SECOND),
                                                                     _MICROS_PER_SECOND)))
    return table.set_column(index, table.field(index), hybrid.cast(table.field(index).type))


def selected(table: pa.Table, q: ql.Query) -> pa.Table:
    """The rows of `table` that meet the query's conditions, in its columns."""
    mask = None
    for condition in q.conditions:
        column = table.column(condition.column)
        holds = pc.and_(pc.greater_equal(column, condition.low), pc.less_equal(column, condition.high))
        if condition.among is not None:
            holds = pc.and_(holds, pc.is_in(column, value_set=pa.array(condition.among, column.type)))
        mask = holds if mask is None else pc.and_(mask, holds)
    if mask is not None:
        table = table.filter(mask)
    return table if q.columns is None else table.select(list(q.columns))


def check_format_attributes(attributes: Mapping[str, Any]) -> None:
    """Refuse a row format whose attributes would change the wire representation the stand-in speaks."""
    for key, value in attributes.items():
        if key in WIRE_FORMAT_ATTRIBUTES and str(value) != WIRE_FORMAT_ATTRIBUTES[key]:
            raise BadRequest(f"format attribute {key}={value}: the stand-in speaks "
                             f"{key}={WIRE_FORMAT_ATTRIBUTES[key]} only")
