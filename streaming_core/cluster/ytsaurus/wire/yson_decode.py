"""Binary (or text) YSON rows (a list fragment) -> Arrow through the bindings' Python objects: the fallback of
`yson_columns` for bytes it declines, and the reference its tests compare with.

The bindings parse the bytes into plain Python values in C++ (`always_create_attributes=False`,
`encoding=None`: dicts with bytes keys, strings as bytes, `#` as None). Each column is then gathered from
the rows in one pass and handed to `pa.array` with its Arrow type, which converts it in C++; columns whose
YSON representation differs from what Arrow takes are converted on the array (datetimes: seconds to
microseconds by a kernel; decimals: a numpy byte shuffle). Composite values are split into their
children's columns the same way (a list's items flattened, a struct's members gathered), decoded
recursively and reassembled with their offsets and nulls. Only `yson` columns go value by value: each
value is written back to YSON bytes, attributes included, by the bindings.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from itertools import chain
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import SchemaError
from ...schema import is_optional, variant_alternatives
from . import bindings, decimal

#: One column's parsed YSON values -> an Arrow array of the column's type.
Decoder = Callable[[list[Any]], pa.Array]

_MICROS_PER_SECOND = 1_000_000
_DATETIMES = ("datetime", "datetime64")


def parse_rows(raw: bytes | bytearray | memoryview) -> list[dict[bytes, Any]]:
    """The rows of a binary (or text) YSON list fragment as plain dicts keyed by bytes."""
    return list(bindings.loads(bytes(raw), yson_type="list_fragment", always_create_attributes=False,
                               encoding=None))


def column(rows: list[dict[bytes, Any]], name: str) -> list[Any]:
    """One column's values across the rows (None where a row lacks it)."""
    key = name.encode()
    try:
        return list(map(itemgetter(key), rows))
    except KeyError:
        return [row.get(key) for row in rows]


def decoder(type_v3: Any, arrow: pa.DataType, where: str) -> Decoder:
    """The decoder of a column (or a composite's child) of YT type `type_v3` into Arrow type `arrow`."""
    if isinstance(type_v3, str):
        return _scalar(type_v3, arrow, where)
    name = type_v3["type_name"]
    if name == "tagged" or (name == "optional" and not is_optional(type_v3["item"])):
        return decoder(type_v3["item"], arrow, where)
    if name == "optional":  # an optional of an optional: `[value]` or `[#]` (Arrow has one null for both)
        item = decoder(type_v3["item"], arrow, where)
        return lambda values: item([None if v is None else v[0] for v in values])
    if name == "list":
        return _list(decoder(type_v3["item"], arrow.value_type, where), arrow)
    if name == "struct":
        keys = [m["name"].encode() for m in type_v3["members"]]
        children = [decoder(m["type"], arrow.field(i).type, where) for i, m in enumerate(type_v3["members"])]
        return _struct(lambda v, i: v.get(keys[i]), children, arrow)
    if name == "tuple":
        children = [decoder(e["type"], arrow.field(i).type, where) for i, e in enumerate(type_v3["elements"])]
        return _struct(lambda v, i: v[i], children, arrow)
    if name == "dict":
        return _dict(decoder(type_v3["key"], arrow.key_type, where),
                     decoder(type_v3["value"], arrow.item_type, where), arrow)
    if name == "variant":
        alternatives = variant_alternatives(type_v3)
        children = [decoder(t, arrow.field(i).type, where) for i, (_, t) in enumerate(alternatives)]
        return _variant({n.encode(): i for i, (n, _) in enumerate(alternatives)}, children, arrow)
    if name == "decimal":
        precision, scale = int(type_v3["precision"]), int(type_v3["scale"])
        return lambda values: decimal.from_wire(_array(values, pa.binary(), where), precision, scale, where)
    return _scalar(name, arrow, where)


def _array(values: list[Any], arrow: pa.DataType, where: str) -> pa.Array:
    try:
        return pa.array(values, type=arrow)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as e:
        raise SchemaError(f"{where}: a value read does not fit {arrow}: {e}") from None


def _scalar(name: str, arrow: pa.DataType, where: str) -> Decoder:
    if name in ("null", "void"):
        return lambda values: pa.nulls(len(values))
    if name in ("yson", "any"):
        return lambda values: pa.array([None if v is None else bindings.dumps(v) for v in values], pa.binary())
    if name == "uuid":  # 16 bytes on the wire, whatever the format asks (the schemaful writer ignores `uuid_mode`)
        return lambda values: pa.array([None if v is None else str(uuid.UUID(bytes_le=v)) for v in values],
                                       pa.string())
    if name in _DATETIMES:  # seconds on the wire, microseconds in Arrow
        return lambda values: pc.multiply_checked(_array(values, pa.int64(), where), _MICROS_PER_SECOND).cast(arrow)
    return lambda values: _array(values, arrow, where)


def _lengths(values: list[Any]) -> tuple[np.ndarray, pa.Array | None]:
    """Per value its length (0 for null) as offsets, and the null mask (None without nulls)."""
    lengths = np.fromiter((-1 if v is None else len(v) for v in values), np.int64, len(values))
    nulls = lengths < 0
    lengths[nulls] = 0
    offsets = np.zeros(len(values) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets, (pa.array(nulls) if nulls.any() else None)


def _list(item: Decoder, arrow: pa.DataType) -> Decoder:
    def decode(values: list[Any]) -> pa.Array:
        offsets, nulls = _lengths(values)
        items = item(list(chain.from_iterable(filter(None, values))))
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), items, type=arrow, mask=nulls)
    return decode


def _struct(get: Callable[[Any, int], Any], children: Sequence[Decoder], arrow: pa.DataType) -> Decoder:
    """Structs (`get` = a member by name) and tuples (`get` = an element by position)."""
    def decode(values: list[Any]) -> pa.Array:
        nulls = [v is None for v in values]
        arrays = [child([None if v is None else get(v, i) for v in values]) for i, child in enumerate(children)]
        return pa.StructArray.from_arrays(arrays, fields=list(arrow), mask=pa.array(nulls) if any(nulls) else None)
    return decode


def _dict(key: Decoder, value: Decoder, arrow: pa.DataType) -> Decoder:
    """`[[key;value];...]` into a map array."""
    def decode(values: list[Any]) -> pa.Array:
        offsets, nulls = _lengths(values)
        pairs = list(chain.from_iterable(filter(None, values)))
        keys, items = key([p[0] for p in pairs]), value([p[1] for p in pairs])
        return pa.MapArray.from_arrays(pa.array(offsets.astype(np.int32)), keys, items, type=arrow, mask=nulls)
    return decode


def _variant(names: dict[bytes, int], children: Sequence[Decoder], arrow: pa.DataType) -> Decoder:
    """`[name or index;value]` into a struct whose one non-null field is the alternative held."""
    def decode(values: list[Any]) -> pa.Array:
        held = [None if v is None else (v[0] if isinstance(v[0], int) else names[v[0]]) for v in values]
        arrays = [child([v[1] if h == i else None for v, h in zip(values, held, strict=True)])
                  for i, child in enumerate(children)]
        nulls = [h is None for h in held]
        return pa.StructArray.from_arrays(arrays, fields=list(arrow), mask=pa.array(nulls) if any(nulls) else None)
    return decode
