"""Arrow -> binary YSON rows (a list fragment), a whole column at a time.

Each column becomes an array of its values' YSON tokens (`large_binary`, one element per row, `#` for null)
built by numpy and Arrow compute kernels over the column: integers as zigzag varints, doubles as their
8 bytes, strings as a length prefix joined to the values. Composite values are built the same way from
their children's tokens (`binary_join` of a list's items, element-wise joins of a struct's members), and
one element-wise join of all columns with their keys makes the rows. No Python code runs per value, except
for the check that each value of a `yson` column is one YSON node (one parse of them all, then a
comparison per value), so that a malformed value is refused instead of corrupting the rows around it.

Binary YSON (YTsaurus docs, "YSON"): a string is 0x01, a zigzag varint length and the bytes; an int64 0x02
and a zigzag varint; a double 0x03 and 8 little-endian bytes; false 0x04, true 0x05; a uint64 0x06 and a
varint. Representations per type are those of `WIRE_FORMAT_ATTRIBUTES` (see `rows`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from yt.yson import YsonError

from ...errors import SchemaError
from ...schema import is_optional, variant_alternatives
from . import bindings, decimal

#: One column's values as YSON tokens: a `large_binary` array of the same length, without nulls.
Encoder = Callable[[pa.Array], pa.Array]

_STRING, _INT64, _DOUBLE, _FALSE, _TRUE, _UINT64 = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06
_VARINT_BYTES = 10
_MICROS_PER_SECOND = 1_000_000


def _bytes(value: bytes) -> pa.Scalar:
    return pa.scalar(value, pa.large_binary())


_ENTITY, _EMPTY, _SEMICOLON = _bytes(b"#"), _bytes(b""), _bytes(b";")
_OPEN_LIST, _CLOSE_LIST, _OPEN_MAP, _CLOSE_MAP = _bytes(b"["), _bytes(b"]"), _bytes(b"{"), _bytes(b"}")


def varint(value: int) -> bytes:
    """One unsigned varint (for keys and other constants)."""
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def string_token(value: str | bytes) -> bytes:
    """A YSON string token (map keys, variant names)."""
    raw = value.encode() if isinstance(value, str) else value
    return bytes([_STRING]) + varint(2 * len(raw)) + raw


def join(*parts: pa.Array | pa.Scalar) -> pa.Array:
    """Element-wise concatenation of token arrays and constant tokens."""
    return pc.binary_join_element_wise(*parts, _EMPTY)


def _binary(lengths: np.ndarray, data: np.ndarray) -> pa.Array:
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(pa.large_binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _fixed(rows: np.ndarray) -> pa.Array:
    """Tokens from a (n, width) byte matrix, one row per token."""
    return _binary(np.full(len(rows), rows.shape[1], np.int64), np.ascontiguousarray(rows).reshape(-1))


def _varint_tokens(marker: int, values: np.ndarray) -> pa.Array:
    """A marker byte followed by the varint of each (uint64) value."""
    groups = np.empty((len(values), 1 + _VARINT_BYTES), np.uint8)
    groups[:, 0] = marker
    rest = values.astype(np.uint64, copy=True)
    count = np.ones(len(values), np.int64)
    for i in range(1, 1 + _VARINT_BYTES):
        low = (rest & np.uint64(0x7F)).astype(np.uint8)
        rest >>= np.uint64(7)
        more = rest != 0
        groups[:, i] = low | (more.astype(np.uint8) << 7)
        count += more
    keep = np.arange(1 + _VARINT_BYTES) <= count[:, None]
    return _binary(count + 1, groups[keep])


def _zigzag(values: np.ndarray) -> np.ndarray:
    signed = values.astype(np.int64, copy=False)
    return ((signed << 1) ^ (signed >> 63)).view(np.uint64)


def _numbers(arr: pa.Array, dtype: Any) -> np.ndarray:
    """The column's values as a numpy array (nulls as zeros: their tokens are replaced by `#`)."""
    filled = arr.fill_null(0) if arr.null_count else arr
    return filled.to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def _nullable(encode: Encoder) -> Encoder:
    """Nulls as `#` around an encoder that fills every slot."""
    def encoded(arr: pa.Array) -> pa.Array:
        tokens = encode(arr)
        return pc.if_else(arr.is_valid(), tokens, _ENTITY) if arr.null_count else tokens
    return encoded


def _int64(arr: pa.Array) -> pa.Array:
    return _varint_tokens(_INT64, _zigzag(_numbers(arr.cast(pa.int64()), np.int64)))


def _uint64(arr: pa.Array) -> pa.Array:
    return _varint_tokens(_UINT64, _numbers(arr.cast(pa.uint64()), np.uint64))


def _double(arr: pa.Array) -> pa.Array:
    rows = np.empty((len(arr), 9), np.uint8)
    rows[:, 0] = _DOUBLE
    rows[:, 1:] = _numbers(arr.cast(pa.float64()), np.float64).astype("<f8").view(np.uint8).reshape(-1, 8)
    return _fixed(rows)


def _bool(arr: pa.Array) -> pa.Array:
    flags = arr.fill_null(False) if arr.null_count else arr
    return _fixed(np.where(flags.to_numpy(zero_copy_only=False), _TRUE, _FALSE).astype(np.uint8)[:, None])


def _string(arr: pa.Array) -> pa.Array:
    lengths = _numbers(pc.binary_length(arr), np.int64)
    return join(_varint_tokens(_STRING, _zigzag(lengths)), arr.cast(pa.large_binary()))


def _uuid(arr: pa.Array) -> pa.Array:
    """A uuid's text as its 16 bytes (`uuid_mode=binary`), in the order YTsaurus reads the YQL text form
    (`yt/yt/client/complex_types/uuid_text.cpp`): Python's `bytes_le`."""
    try:
        raw = [None if v is None else uuid.UUID(v).bytes_le for v in arr.to_pylist()]
    except ValueError as e:
        raise SchemaError(f"a uuid is not in its text form: {e}") from None
    return _string(pa.array(raw, pa.binary()))


def _date_days(arr: pa.Array) -> pa.Array:
    return _int64(arr.cast(pa.int32()))


def _micros(arr: pa.Array) -> pa.Array:
    return _int64(arr.cast(pa.int64()))


def _seconds(arr: pa.Array) -> pa.Array:
    """Datetimes are whole seconds; a timestamp column holds microseconds (floored, as Python's `//`)."""
    micros = _numbers(arr.cast(pa.int64()), np.int64)
    return _varint_tokens(_INT64, _zigzag(np.floor_divide(micros, _MICROS_PER_SECOND)))


def _null(arr: pa.Array) -> pa.Array:
    return pa.repeat(_ENTITY, len(arr))


def _yson(where: str, binary: bool) -> Encoder:
    """A `yson` column holds YSON-encoded bytes, embedded as they are (or, `binary`, written in binary YSON: all
    values parsed in one call, written in one, and cut) once each is known to be exactly one YSON node (a row is
    one YSON map, so a value must not be able to end it early or add keys to it)."""
    def encode(arr: pa.Array) -> pa.Array:
        values = [v for v in arr.to_pylist() if v is not None]
        if not _one_node_each(values):
            for row, value in enumerate(arr.to_pylist()):
                try:
                    if value is not None:
                        bindings.loads(value)
                except YsonError as e:
                    raise SchemaError(f"{where}: row {row}: not a YSON value ({bindings.reason(e)})") from None
        if not binary or not values:
            return arr.cast(pa.large_binary())
        nodes = bindings.loads(b";".join(values) + b";", yson_type="list_fragment", always_create_attributes=False,
                               encoding=None)
        written = bindings.dumps(list(nodes), yson_type="list_fragment", yson_format="binary")
        items = pc.binary_slice(pa.array(bindings.loads(written, yson_type="list_fragment", raw=True),
                                         pa.large_binary()), 0, -1)  # each without its `;`
        if not arr.null_count:
            return items
        index = np.cumsum(np.asarray(arr.is_valid())) - 1
        return items.take(pa.array(index, mask=np.asarray(arr.is_null())))
    return encode


def _one_node_each(values: list[bytes]) -> bool:
    """Whether each value is one YSON node, checked in one parse: joined as a list fragment, the parser must
    find one item per value, each the value itself (up to surrounding whitespace). A value that is not one
    node shifts the items (`1;2` makes two, `[1` and `2]` one) or fails the parse. False sends the caller to
    the per-value check (~5x slower: one parser call each), which names the row at fault."""
    if not values:
        return True
    try:
        items = list(bindings.loads(b";".join(values) + b";", yson_type="list_fragment", raw=True))
    except YsonError:
        return False
    return len(items) == len(values) and all(
        item.rstrip().removesuffix(b";").strip() == value.strip() for item, value in zip(items, values, strict=True))


_SCALARS: dict[str, Encoder] = {
    **dict.fromkeys(("int8", "int16", "int32", "int64", "interval", "interval64"), _int64),
    **dict.fromkeys(("uint8", "uint16", "uint32", "uint64"), _uint64),
    **dict.fromkeys(("double", "float"), _double),
    **dict.fromkeys(("bool", "boolean"), _bool),
    **dict.fromkeys(("string", "utf8", "json"), _string),
    "uuid": _uuid,
    **dict.fromkeys(("date", "date32"), _date_days),
    **dict.fromkeys(("timestamp", "timestamp64"), _micros),
    **dict.fromkeys(("datetime", "datetime64"), _seconds),
}


def encoder(type_v3: Any, where: str, *, binary_yson: bool = False) -> Encoder:
    """The encoder of a column (or a composite's child) of YT type `type_v3`, its values as the schema's Arrow
    type holds them. `where` names the column in errors; `binary_yson` writes `yson` values in binary, as a
    proxy writes a stored value, rather than in the form the Arrow side holds them."""
    def child(item: Any) -> Encoder:
        return encoder(item, where, binary_yson=binary_yson)

    if isinstance(type_v3, str):
        return _scalar(type_v3, where, binary_yson)
    name = type_v3["type_name"]
    if name == "tagged" or (name == "optional" and not is_optional(type_v3["item"])):
        return child(type_v3["item"])
    if name == "optional":  # an optional of an optional: a present value travels as a one-element list
        item = child(type_v3["item"])
        return _nullable(lambda arr: join(_OPEN_LIST, item(arr), _CLOSE_LIST))
    if name == "list":
        return _nullable(_list(child(type_v3["item"])))
    if name == "struct":
        members = [(string_token(m["name"]), child(m["type"])) for m in type_v3["members"]]
        return _nullable(_struct(members))
    if name == "tuple":
        return _nullable(_tuple([child(e["type"]) for e in type_v3["elements"]]))
    if name == "dict":
        return _nullable(_dict(child(type_v3["key"]), child(type_v3["value"])))
    if name == "variant":
        alternatives = variant_alternatives(type_v3)
        tags = ([string_token(n) for n, _ in alternatives] if "members" in type_v3
                else [bytes([_INT64]) + varint(2 * i) for i in range(len(alternatives))])
        return _nullable(_variant([(tag, child(t)) for tag, (_, t) in zip(tags, alternatives, strict=True)]))
    if name == "decimal":
        precision, scale = int(type_v3["precision"]), int(type_v3["scale"])
        return _nullable(_decimal(precision, scale, where))
    return _scalar(name, where, binary_yson)


def _scalar(name: str, where: str, binary_yson: bool) -> Encoder:
    if name in ("null", "void"):
        return _null
    if name in ("yson", "any"):
        return _nullable(_yson(where, binary_yson))
    return _nullable(_SCALARS[name])


def _list(item: Encoder) -> Encoder:
    """`[a;b;c]`: the items' tokens joined per row (the items of null lists are left out)."""
    def encode(arr: pa.Array) -> pa.Array:
        lengths = _numbers(pc.list_value_length(arr), np.int64)
        return _join_runs(lengths, item(arr.flatten()), _OPEN_LIST, _CLOSE_LIST)
    return encode


def _join_runs(lengths: np.ndarray, tokens: pa.Array, open_: pa.Scalar, close: pa.Scalar) -> pa.Array:
    """Per row, `lengths[row]` consecutive tokens joined with `;` between `open_` and `close`."""
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    runs = pa.LargeListArray.from_arrays(pa.array(offsets), tokens)
    return join(open_, pc.binary_join(runs, _SEMICOLON), close)


def _struct(members: list[tuple[bytes, Encoder]]) -> Encoder:
    """`{"name"=value;...}` (`complex_type_mode=named`)."""
    def encode(arr: pa.Array) -> pa.Array:
        parts: list[pa.Array | pa.Scalar] = [_OPEN_MAP]
        for i, (key, member) in enumerate(members):
            parts += [_bytes((b";" if i else b"") + key + b"="), member(arr.field(i))]
        return join(*parts, _CLOSE_MAP)
    return encode


def _tuple(elements: list[Encoder]) -> Encoder:
    """`[first;second;...]`: Arrow holds a tuple as a struct of `_1`.. `_n`."""
    def encode(arr: pa.Array) -> pa.Array:
        parts: list[pa.Array | pa.Scalar] = [_OPEN_LIST]
        for i, element in enumerate(elements):
            parts += [*([_SEMICOLON] if i else []), element(arr.field(i))]
        return join(*parts, _CLOSE_LIST)
    return encode


def _dict(key: Encoder, value: Encoder) -> Encoder:
    """`[[key;value];...]` whatever the key type (`string_keyed_dict_mode=positional`)."""
    def encode(arr: pa.Array) -> pa.Array:
        entries = arr.cast(pa.list_(pa.struct([("key", arr.type.key_type), ("value", arr.type.item_type)])))
        lengths = _numbers(pc.list_value_length(entries), np.int64)
        pairs = entries.flatten()
        tokens = join(_OPEN_LIST, key(pairs.field(0)), _SEMICOLON, value(pairs.field(1)), _CLOSE_LIST)
        return _join_runs(lengths, tokens, _OPEN_LIST, _CLOSE_LIST)
    return encode


def _variant(alternatives: list[tuple[bytes, Encoder]]) -> Encoder:
    """`[name or index;value]` of the first alternative set (Arrow: a struct of `_v<name>` fields, one set);
    none set sends the first alternative with a null value."""
    def encode(arr: pa.Array) -> pa.Array:
        candidates = [join(_bytes(b"[" + tag + b";"), item(arr.field(i)), _CLOSE_LIST)
                      for i, (tag, item) in enumerate(alternatives)]
        chosen = candidates[0]
        for i in reversed(range(len(alternatives))):
            chosen = pc.if_else(arr.field(i).is_valid(), candidates[i], chosen)
        return chosen
    return encode


def _decimal(precision: int, scale: int, where: str) -> Encoder:
    """A YSON string of the binary decimal: a constant prefix (its length is the width) and the bytes."""
    width = decimal.wire_width(precision)
    prefix = np.frombuffer(bytes([_STRING]) + varint(2 * width), np.uint8)

    def encode(arr: pa.Array) -> pa.Array:
        wire = decimal.to_wire(arr, precision, scale, where)
        return _fixed(np.hstack([np.broadcast_to(prefix, (len(arr), len(prefix))), wire]))
    return encode


def encode_rows(columns: list[tuple[str, pa.Array, Encoder]], row_count: int) -> bytes:
    """The rows as one binary YSON list fragment: `{key=value;...};` per row, columns in the given order."""
    if row_count == 0:
        return b""
    parts: list[pa.Array | pa.Scalar] = [pa.repeat(_OPEN_MAP, row_count)]
    for i, (name, values, encode) in enumerate(columns):
        parts += [_bytes((b";" if i else b"") + string_token(name) + b"="), encode(values)]
    rows = join(*parts, _bytes(b"};"))
    offsets = np.frombuffer(rows.buffers()[1], np.int64)[rows.offset:rows.offset + row_count + 1]
    return rows.buffers()[2][int(offsets[0]):int(offsets[-1])].to_pybytes()
