"""YT table schemas and their mapping to Arrow.

A column's type is kept in `type_v3` form (`"int64"`, `{"type_name": "optional", "item": "utf8"}`, ...),
whether the schema was given with `type_v3` or with the old `type` + `required` pair. Arrow is the
interchange format of the cluster interface, so this module is the one place that maps YT types to
Arrow; `streaming_core.types` maps Arrow to Spark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from .errors import RowError, SchemaError

_SIMPLE: dict[str, pa.DataType] = {
    "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
    "uint8": pa.uint8(), "uint16": pa.uint16(), "uint32": pa.uint32(), "uint64": pa.uint64(),
    "double": pa.float64(), "float": pa.float32(),
    "boolean": pa.bool_(), "bool": pa.bool_(),
    "string": pa.string(), "utf8": pa.string(), "json": pa.string(), "uuid": pa.string(),
    "yson": pa.binary(), "any": pa.binary(),
    "date": pa.date32(), "datetime": pa.timestamp("us", tz="UTC"), "timestamp": pa.timestamp("us", tz="UTC"),
    "interval": pa.int64(), "null": pa.null(), "void": pa.null(),
    # The wide (signed, 64-bit) date types hold the same units as their narrow twins.
    "date32": pa.date32(), "datetime64": pa.timestamp("us", tz="UTC"), "timestamp64": pa.timestamp("us", tz="UTC"),
    "interval64": pa.int64(),
}
#: Prefix of a variant's members on the Arrow (and Spark) side, as SPYT names them: `_v<name>`, `_v_<i>`.
VARIANT_PREFIX = "_v"
#: Old-style (`type`) names whose type_v3 name differs.
_OLD_TO_V3 = {"boolean": "bool", "any": "yson"}

#: Service columns of ordered dynamic tables, readable but never part of the stored schema.
TABLET_INDEX = "$tablet_index"
ROW_INDEX = "$row_index"
TIMESTAMP = "$timestamp"
#: The column of a `push_queue_producer` row that carries its sequence number (never stored in the queue).
SEQUENCE_NUMBER = "$sequence_number"
#: A queue's system column that the cluster fills on write: the data weight of the tablet's rows up to and including
#: this one, since the tablet was created (`streaming_core.cluster.data_weight`). Rows (a, b] weigh cdw[b] - cdw[a].
CUMULATIVE_DATA_WEIGHT = "$cumulative_data_weight"
#: System columns a queue's schema may declare, which the cluster fills on write (a writer's values are ignored).
STAMPED_COLUMNS = (TIMESTAMP, CUMULATIVE_DATA_WEIGHT)

#: The consumer table schema YTsaurus queue agents expect (`treat_as_queue_consumer`), for every backend.
CONSUMER_SCHEMA = [
    {"name": "queue_cluster", "type": "string", "required": True, "sort_order": "ascending"},
    {"name": "queue_path", "type": "string", "required": True, "sort_order": "ascending"},
    {"name": "partition_index", "type": "uint64", "required": True, "sort_order": "ascending"},
    {"name": "offset", "type": "uint64", "required": True},
    {"name": "meta", "type": "any", "required": False},
]

#: The queue producer table schema (`create queue_producer`), as YTsaurus' queue agent state defines it
#: (`yt/python/yt/environment/init_queue_agent_state.py`, `PRODUCER_OBJECT_TABLE_SCHEMA`): one row per session.
PRODUCER_SCHEMA = [
    {"name": "queue_cluster", "type": "string", "required": True, "sort_order": "ascending"},
    {"name": "queue_path", "type": "string", "required": True, "sort_order": "ascending"},
    {"name": "session_id", "type": "string", "required": True, "sort_order": "ascending"},
    {"name": "sequence_number", "type": "int64", "required": True},
    {"name": "epoch", "type": "int64", "required": True},
    {"name": "user_meta", "type": "any", "required": False},
    {"name": "system_meta", "type": "any", "required": False},
]


def _optional(item: Any) -> dict[str, Any]:
    return {"type_name": "optional", "item": item}


def is_optional(type_v3: Any) -> bool:
    return isinstance(type_v3, Mapping) and type_v3.get("type_name") == "optional"


#: Type names of the composite types: YSON-encoded on the Spark side unless type_v3 is on.
COMPOSITE_TYPES = frozenset({"list", "struct", "tuple", "dict", "variant"})


def is_composite(type_v3: Any) -> bool:
    """True for lists, structs, tuples, dicts and variants (optional and tagged unwrapped)."""
    while isinstance(type_v3, Mapping) and type_v3.get("type_name") in ("optional", "tagged"):
        type_v3 = type_v3["item"]
    return isinstance(type_v3, Mapping) and type_v3.get("type_name") in COMPOSITE_TYPES


def arrow_type(type_v3: Any, column: str = "?") -> pa.DataType:
    """The Arrow type of a YT type_v3 (optional unwrapped: nullability is a field property)."""
    try:
        return _arrow_type(type_v3, column)
    except (KeyError, TypeError, ValueError) as e:
        raise SchemaError(f"column {column!r}: malformed type_v3 {type_v3!r} (missing or bad {e})") from None


def _arrow_type(type_v3: Any, column: str) -> pa.DataType:
    if isinstance(type_v3, str):
        try:
            return _SIMPLE[type_v3]
        except KeyError:
            raise SchemaError(f"column {column!r}: unknown YT type {type_v3!r}") from None
    if not isinstance(type_v3, Mapping) or "type_name" not in type_v3:
        raise SchemaError(f"column {column!r}: malformed type_v3 {type_v3!r}")
    name = type_v3["type_name"]
    if name in _SIMPLE:
        return _SIMPLE[name]
    if name == "optional":
        return arrow_type(type_v3["item"], column)
    if name == "decimal":
        return pa.decimal128(int(type_v3["precision"]), int(type_v3["scale"]))
    if name == "list":
        return pa.list_(_arrow_field("element", type_v3["item"], column))
    if name == "struct":
        return pa.struct([_arrow_field(m["name"], m["type"], column) for m in type_v3["members"]])
    if name == "tuple":
        return pa.struct([_arrow_field(f"_{i + 1}", e["type"], column) for i, e in enumerate(type_v3["elements"])])
    if name == "dict":
        return pa.map_(arrow_type(type_v3["key"], column), _arrow_field("value", type_v3["value"], column))
    if name == "tagged":
        return arrow_type(type_v3["item"], column)
    if name == "variant":
        return pa.struct([pa.field(VARIANT_PREFIX + n, arrow_type(t, column), nullable=True)
                          for n, t in variant_alternatives(type_v3)])
    raise SchemaError(f"column {column!r}: YT type {name!r} is not supported")


def variant_alternatives(type_v3: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """A variant's (name, type) alternatives: its members, or its elements named `_1`, `_2`, ...

    On the Arrow side a variant is a struct whose one non-null field is the alternative held (`_v<name>`).
    """
    if "members" in type_v3:
        return [(m["name"], m["type"]) for m in type_v3["members"]]
    return [(f"_{i + 1}", e["type"]) for i, e in enumerate(type_v3["elements"])]


def _arrow_field(name: str, type_v3: Any, column: str) -> pa.Field:
    return pa.field(name, arrow_type(type_v3, column), nullable=is_optional(type_v3) or type_v3 in ("null", "void"))


#: Column properties besides name, type and sort order that a YTsaurus schema carries and a table made from the
#: schema must keep (`yt/yt/client/table_client/schema.h`): a computed column's `expression`, an `aggregate`
#: function, a `lock` group, a column `group`, and `max_inline_hunk_size`.
COLUMN_PROPERTIES = ("expression", "aggregate", "lock", "group", "max_inline_hunk_size")


@dataclass(frozen=True)
class Column:
    """One column of a YT schema; `type_v3` is always set (`required` is its non-optional form). `properties`: the
    other properties the schema gives (`COLUMN_PROPERTIES`), as (name, value) pairs, kept as they came."""

    name: str
    type_v3: Any
    sort_order: str | None = None
    properties: tuple[tuple[str, Any], ...] = ()

    @property
    def expression(self) -> str | None:
        """The expression of a computed column (YTsaurus fills it; it may not be written)."""
        return dict(self.properties).get("expression")

    @property
    def required(self) -> bool:
        return not is_optional(self.type_v3) and self.type_v3 not in ("null", "void", "yson")

    @classmethod
    def from_yt(cls, spec: Mapping[str, Any]) -> Column:
        name = spec.get("name")
        if not name:
            raise SchemaError(f"schema column without a name: {dict(spec)!r}")
        if "type_v3" in spec:
            type_v3 = spec["type_v3"]
        elif "type" in spec:
            base = _OLD_TO_V3.get(spec["type"], spec["type"])
            type_v3 = base if spec.get("required") else _optional(base)
        else:
            raise SchemaError(f"column {name!r}: neither 'type' nor 'type_v3' given")
        arrow_type(type_v3, name)  # validates
        properties = tuple((key, spec[key]) for key in COLUMN_PROPERTIES if spec.get(key) is not None)
        return cls(name=name, type_v3=type_v3, sort_order=spec.get("sort_order"), properties=properties)

    def to_yt(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"name": self.name, "type_v3": self.type_v3}
        if self.sort_order:
            spec["sort_order"] = self.sort_order
        return {**spec, **dict(self.properties)}

    def arrow_field(self) -> pa.Field:
        return _arrow_field(self.name, self.type_v3, self.name)


@dataclass(frozen=True)
class TableSchema:
    """An ordered list of columns. Key columns (with `sort_order`) come first, as YTsaurus requires."""

    columns: tuple[Column, ...]

    @classmethod
    def from_yt(cls, spec: Sequence[Mapping[str, Any]] | TableSchema) -> TableSchema:
        if isinstance(spec, TableSchema):
            return spec
        columns = tuple(Column.from_yt(c) for c in spec)
        names = [c.name for c in columns]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SchemaError(f"duplicate column names in schema: {dupes}")
        keys = [c.sort_order is not None for c in columns]
        if keys != sorted(keys, reverse=True):
            raise SchemaError("key columns (with sort_order) must come before the other columns")
        return cls(columns)

    def to_yt(self) -> list[dict[str, Any]]:
        return [c.to_yt() for c in self.columns]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def key_columns(self) -> list[str]:
        return [c.name for c in self.columns if c.sort_order]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise SchemaError(f"no column {name!r} in schema {self.names}")

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([c.arrow_field() for c in self.columns])

    def writable(self) -> TableSchema:
        """The columns a writer may give (YTsaurus' write schema, `TTableSchema::ToWrite`): neither the system
        columns the cluster fills (`STAMPED_COLUMNS`) nor computed ones. An ordered table's writer may add
        `$tablet_index`, a service column."""
        return TableSchema(tuple(c for c in self.columns if c.name not in STAMPED_COLUMNS and not c.expression))


def to_arrow_table(schema: TableSchema, rows: Any, path: str) -> pa.Table:
    """Rows (list of dicts, Arrow table or batch) as an Arrow table of exactly `schema`'s columns.

    Raises `SchemaError` naming the path, the column and, for Python rows, the first row at fault.
    Service columns (`$tablet_index`, ...) are dropped; callers read them before converting.
    """
    target = schema.arrow_schema()
    if isinstance(rows, pa.RecordBatch):
        rows = pa.Table.from_batches([rows])
    arrow = isinstance(rows, pa.Table)
    table = _conform_arrow(rows, target, path) if arrow else _from_pylist(list(rows), target, path)
    _check_required(schema, table, path)
    return table


def _conform_arrow(table: pa.Table, target: pa.Schema, path: str) -> pa.Table:
    names = [n for n in table.column_names if not n.startswith("$")]
    unknown = sorted(set(names) - set(target.names))
    if unknown:
        raise SchemaError(f"{path}: columns {unknown} are not in the table schema {target.names}")
    arrays = []
    for f in target:
        if f.name not in table.column_names:
            arrays.append(pa.nulls(table.num_rows, f.type))
            continue
        col = table.column(f.name)
        try:
            arrays.append(col.cast(f.type) if col.type != f.type else col)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise SchemaError(f"{path}: column {f.name!r} of type {col.type} does not fit {f.type}: {e}") from None
    return pa.Table.from_arrays(arrays, schema=target)


def _from_pylist(rows: list[Mapping[str, Any]], target: pa.Schema, path: str) -> pa.Table:
    _check_rows(rows, target, path)
    try:
        return pa.Table.from_pylist(rows, schema=target)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        pass
    for f in target:  # slow path: find the first culprit for a precise message
        for i, row in enumerate(rows):
            try:
                pa.array([row.get(f.name)], type=f.type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as e:
                raise _bad_value(path, i, f, row.get(f.name), str(e)) from None
    raise SchemaError(f"{path}: rows do not fit the schema {target}")


def _check_rows(rows: list[Mapping[str, Any]], target: pa.Schema, path: str) -> None:
    """Reject the first row that is no mapping, has an unknown column, or holds a value pyarrow would
    coerce silently. Whole-list checks at C speed come first: the per-row scan, which would halve the
    append rate of a plain string payload, runs only when they find something or a column needs it."""
    allowed = set(target.names)
    guarded = [f for f in target if _can_coerce_silently(f.type)]
    if not guarded and _plain_dicts_within(rows, allowed):
        return
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise RowError(path, i, f" is not a mapping: {row!r}")
        extra = [k for k in row if k not in allowed and not k.startswith("$")]
        if extra:
            raise RowError(path, i, f" has columns {sorted(extra)} that are not in the schema {target.names}")
        for f in guarded:
            if _coerced(row.get(f.name), f.type):
                raise _bad_value(path, i, f, row.get(f.name), "pyarrow would coerce it")


def _plain_dicts_within(rows: list[Any], allowed: set[str]) -> bool:
    """Whether every row is a dict whose keys are schema or service columns."""
    if not set(map(type, rows)) <= {dict}:
        return False
    return all(k in allowed or k.startswith("$") for k in set().union(*rows))


def _bad_value(path: str, row: int, f: pa.Field, value: Any, detail: str) -> RowError:
    return RowError(path, row, f", column {f.name!r}: value {value!r} is not of type {f.type} ({detail})")


def _can_coerce_silently(t: pa.DataType) -> bool:
    """Whether pyarrow's conversion of Python values into `t` may change a value instead of failing."""
    return any(check(t) for check in (pa.types.is_integer, pa.types.is_list, pa.types.is_large_list,
                                      pa.types.is_map, pa.types.is_struct))


def _coerced(value: Any, t: pa.DataType) -> bool:
    """True for a value pyarrow would accept into `t` by changing it: a float truncated into an integer, a
    string split into a list of characters, a struct member it does not know dropped. Values pyarrow
    rejects by itself are left to it (its error is then reported with the row)."""
    if value is None or not _can_coerce_silently(t):
        return False
    if pa.types.is_integer(t):
        return isinstance(value, float)
    if isinstance(value, str | bytes):
        return not pa.types.is_struct(t)
    if pa.types.is_struct(t):
        return isinstance(value, Mapping) and _struct_coerced(value, t)
    if pa.types.is_map(t):
        items = value.items() if isinstance(value, Mapping) else value
        return _any_coerced((v for _, v in _pairs(items)), t.item_type)
    return _any_coerced(value, t.value_type)


def _struct_coerced(value: Mapping[str, Any], t: pa.StructType) -> bool:
    names = {t.field(i).name for i in range(t.num_fields)}
    if any(k not in names for k in value):
        return True
    return any(_coerced(value.get(t.field(i).name), t.field(i).type) for i in range(t.num_fields))


def _any_coerced(values: Any, t: pa.DataType) -> bool:
    if not _can_coerce_silently(t):
        return False
    try:
        return any(_coerced(v, t) for v in values)
    except TypeError:  # not iterable: pyarrow rejects it with a message of its own
        return False


def _pairs(items: Any) -> Any:
    return (p for p in items if isinstance(p, tuple | list) and len(p) == 2)


def _check_required(schema: TableSchema, table: pa.Table, path: str) -> None:
    for c in schema.columns:
        if c.name.startswith("$"):  # service columns ($timestamp) are filled by the cluster after this
            continue
        col = table.column(c.name)
        if c.required and col.null_count:
            first = col.is_null().to_pylist().index(True)
            raise SchemaError(f"{path}: row {first}, column {c.name!r} is required but null")
