"""Arrow <-> Spark types, Spark -> YT types (tables made from a DataFrame), and YSON for composite columns
when type_v3 is off.

The cluster interface speaks Arrow (see `cluster.schema` for YT -> Arrow). Spark takes Arrow batches from
a Python data source's `read()` only in the Arrow types its own schema converts to, so every batch is
cast to `arrow_schema_for_spark(...)` before it is yielded. Without `parsing_type_v3` (SPYT's default),
composite columns reach Spark as YSON-encoded binary, as in SPYT.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema
from yt import yson

from .cluster import SchemaError
from .cluster.schema import VARIANT_PREFIX, TableSchema, is_composite
from .cluster.yson_values import plain

_SIMPLE: list[tuple[Any, T.DataType]] = [
    (pa.types.is_int8, T.ByteType()), (pa.types.is_int16, T.ShortType()), (pa.types.is_int32, T.IntegerType()),
    (pa.types.is_int64, T.LongType()), (pa.types.is_uint8, T.ShortType()), (pa.types.is_uint16, T.IntegerType()),
    (pa.types.is_uint32, T.LongType()), (pa.types.is_uint64, T.LongType()), (pa.types.is_float32, T.FloatType()),
    (pa.types.is_float64, T.DoubleType()), (pa.types.is_boolean, T.BooleanType()),
    (pa.types.is_string, T.StringType()), (pa.types.is_large_string, T.StringType()),
    (pa.types.is_binary, T.BinaryType()), (pa.types.is_date32, T.DateType()),
    (pa.types.is_timestamp, T.TimestampType()), (pa.types.is_null, T.NullType()),
]


def spark_type(arrow: pa.DataType) -> T.DataType:
    """The Spark type a column of this Arrow type reads as (unsigned ints widen; uint64 -> long)."""
    for check, spark in _SIMPLE:
        if check(arrow):
            return spark
    if pa.types.is_decimal(arrow):
        return T.DecimalType(arrow.precision, arrow.scale)
    if pa.types.is_list(arrow) or pa.types.is_large_list(arrow):
        return T.ArrayType(spark_type(arrow.value_type), arrow.value_field.nullable)
    if pa.types.is_map(arrow):
        return T.MapType(spark_type(arrow.key_type), spark_type(arrow.item_type), arrow.item_field.nullable)
    if pa.types.is_struct(arrow):
        return T.StructType([T.StructField(f.name, spark_type(f.type), f.nullable) for f in arrow])
    raise TypeError(f"Arrow type {arrow} has no Spark counterpart")


def spark_schema(arrow: pa.Schema) -> T.StructType:
    return T.StructType([T.StructField(f.name, spark_type(f.type), f.nullable) for f in arrow])


#: The YT type of each Spark scalar type. Binary columns become `yson`: they are what YSON and composite
#: columns read as without type_v3, so such a DataFrame written to a new table round-trips (the embedded
#: cluster's `string` holds text only).
_SPARK_TO_YT: list[tuple[type[T.DataType], str]] = [
    (T.ByteType, "int8"), (T.ShortType, "int16"), (T.IntegerType, "int32"), (T.LongType, "int64"),
    (T.FloatType, "float"), (T.DoubleType, "double"), (T.BooleanType, "bool"), (T.StringType, "string"),
    (T.BinaryType, "yson"), (T.DateType, "date"), (T.TimestampType, "timestamp"),
    (T.TimestampNTZType, "timestamp"), (T.NullType, "null"),
]


def yt_schema(schema: T.StructType, *, type_v3: bool, sort_columns: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The YT schema of a table made for DataFrames of `schema`; `sort_columns` become its (ascending) keys.

    Composite columns get their YT types with `type_v3`, else the `yson` type (SPYT's default). Raises
    `SchemaError` naming every column whose Spark type has no YT counterpart, and unknown sort columns.
    """
    unknown = [c for c in sort_columns if c not in schema.names]
    if unknown:
        raise SchemaError(f"sort columns {unknown} are not columns of the DataFrame {schema.names}")
    columns, problems = [], []
    for f in sorted(schema.fields, key=lambda f: (sort_columns.index(f.name) if f.name in sort_columns
                                                  else len(sort_columns))):
        try:
            column = {"name": f.name, "type_v3": yt_type(f.dataType, f.nullable, type_v3=type_v3)}
        except TypeError as e:
            problems.append(f"{f.name} ({e})")
            continue
        columns.append({**column, "sort_order": "ascending"} if f.name in sort_columns else column)
    if problems:
        raise SchemaError(f"columns with no YT type: {', '.join(problems)}")
    unsortable = [c["name"] for c in columns if c.get("sort_order") and (c["type_v3"] == "yson"
                                                                          or is_composite(c["type_v3"]))]
    if unsortable:
        raise SchemaError(f"sort columns {unsortable} are composite or YSON; key columns must be scalars")
    return columns


def yt_type(spark: T.DataType, nullable: bool, *, type_v3: bool) -> Any:
    """The type_v3 of a Spark type; `TypeError` names a Spark type with no YT counterpart."""
    if isinstance(spark, T.ArrayType | T.MapType | T.StructType) and not type_v3:
        return "yson"
    base = _yt_base_type(spark)
    return {"type_name": "optional", "item": base} if nullable and base not in ("null", "yson") else base


def _yt_base_type(spark: T.DataType) -> Any:
    for cls, name in _SPARK_TO_YT:
        if isinstance(spark, cls):
            return name
    if isinstance(spark, T.DecimalType):
        return {"type_name": "decimal", "precision": spark.precision, "scale": spark.scale}
    if isinstance(spark, T.ArrayType):
        return {"type_name": "list", "item": yt_type(spark.elementType, spark.containsNull, type_v3=True)}
    if isinstance(spark, T.MapType):
        return {"type_name": "dict", "key": yt_type(spark.keyType, False, type_v3=True),
                "value": yt_type(spark.valueType, spark.valueContainsNull, type_v3=True)}
    if isinstance(spark, T.StructType):
        return _yt_struct_type(spark)
    raise TypeError(f"Spark type {spark.simpleString()} has no YT counterpart")


def _yt_struct_type(spark: T.StructType) -> dict[str, Any]:
    """A struct; fields `_1`.. `_n` make a tuple, fields all named `_v...` a variant (SPYT's forms)."""
    names = spark.names
    types = [yt_type(f.dataType, f.nullable, type_v3=True) for f in spark.fields]
    if names and all(n.startswith(VARIANT_PREFIX) for n in names):
        alternatives = [n[len(VARIANT_PREFIX):] for n in names]
        plain = [yt_type(f.dataType, False, type_v3=True) for f in spark.fields]
        if alternatives == [f"_{i + 1}" for i in range(len(names))]:
            return {"type_name": "variant", "elements": [{"type": t} for t in plain]}
        return {"type_name": "variant", "members": [{"name": n, "type": t} for n, t in zip(alternatives, plain,
                                                                                            strict=True)]}
    if names == [f"_{i + 1}" for i in range(len(names))]:
        return {"type_name": "tuple", "elements": [{"type": t} for t in types]}
    return {"type_name": "struct", "members": [{"name": n, "type": t} for n, t in zip(names, types, strict=True)]}


def arrow_schema_for_spark(schema: T.StructType) -> pa.Schema:
    """The Arrow schema Spark expects for batches of `schema` (its own conversion)."""
    return to_arrow_schema(schema, timezone="UTC", prefers_large_types=False)


def read_schema(table: TableSchema, *, type_v3: bool) -> pa.Schema:
    """The Arrow schema rows of `table` are read as: composites become YSON binary without type_v3."""
    fields = []
    for column in table.columns:
        f = column.arrow_field()
        if not type_v3 and is_composite(column.type_v3):
            f = pa.field(column.name, pa.binary(), nullable=True)
        fields.append(f)
    return pa.schema(fields)


def to_yson(values: list[Any]) -> pa.Array:
    """YSON binary encodings of Python values (None stays null)."""
    return pa.array([None if v is None else yson.dumps(_yson_safe(v), yson_format="binary") for v in values],
                    pa.binary())


def from_yson(values: list[bytes | None], target: pa.DataType) -> pa.Array:
    """YSON binary values as an Arrow array of `target`; dicts may come as YT's `[key, value]` pairs."""
    return pa.array([None if v is None else _as_arrow_value(plain(yson.loads(v)), target) for v in values], target)


def _as_arrow_value(value: Any, target: pa.DataType) -> Any:
    """A plain YSON value in the form `pa.array` takes for `target`: map entries as (key, value) tuples."""
    if value is None:
        return None
    if pa.types.is_map(target):
        pairs = value.items() if isinstance(value, dict) else value
        return [(_as_arrow_value(k, target.key_type), _as_arrow_value(v, target.item_type)) for k, v in pairs]
    if (pa.types.is_list(target) or pa.types.is_large_list(target)) and isinstance(value, list):
        return [_as_arrow_value(v, target.value_type) for v in value]
    if pa.types.is_struct(target) and isinstance(value, dict):
        return {f.name: _as_arrow_value(value.get(f.name), f.type) for f in target}
    return value


def _yson_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _yson_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        # Arrow gives maps as lists of (key, value) tuples.
        return [_yson_safe(v) for v in value]
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return value


def conform(batch: pa.RecordBatch, target: pa.Schema, yson_columns: frozenset[str]) -> pa.RecordBatch:
    """`batch` with YSON-encoded composite columns, renamed positionally and cast to `target`."""
    arrays = []
    for name, column, field in zip(batch.schema.names, batch.columns, target, strict=True):
        if name in yson_columns:
            column = to_yson(column.to_pylist())
        arrays.append(column if column.type == field.type else column.cast(field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=target)
