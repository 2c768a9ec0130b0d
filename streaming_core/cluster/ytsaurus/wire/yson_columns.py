"""Binary YSON rows (a list fragment) -> Arrow with numpy, every column across all rows at once, no Python
object per value.

The row-returning commands write every row with the same keys in the same order (the schemaful writer: one
key per column of the rowset, null as `#`), so the rows can be read in lock step: an array holds, per row, the
position where its next token starts, and each column is decoded for all rows by numpy over those positions
(integers as varints gathered from a 64-bit word, doubles as 8 gathered bytes, strings as a take of spans of
the response itself), after which the positions move past it. Composite values go the same way one level
down: a list's items a round at a time (the first item of every row, then the second, ...), a struct's
members, a tuple's elements and a variant's alternatives each as a column of positions; a `yson` value is
stepped through token by token in lock step, and the column's values are written in the bindings' text form
from their tokens where they share one shape (`yson_text`), else parsed in one call and written in one (not a
parser call per value). The cost per byte therefore does not grow with
the number of columns: it is a few numpy operations per column and row, whatever the row's width.

Where the bytes are not in that layout (text YSON, attributes on a row, a key order that differs between
rows, keys of a struct out of the schema's order, a list longer than `MAX_ROUNDS` items, a value that does
not have its column's YSON form), `decode_columns` raises `Declined`, and the caller decodes the same bytes
with the object path (`yson_decode`), which also names a value at fault. Both give the same Arrow table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from yt.yson import YsonError

from ...errors import SchemaError
from ...schema import is_optional, variant_alternatives
from . import bindings, decimal, yson_text
from .yson_text import unzigzag

_STRING, _INT64, _DOUBLE, _FALSE, _TRUE, _UINT64 = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06
_ENTITY, _SEMICOLON, _EQUALS = ord("#"), ord(";"), ord("=")
_OPEN_MAP, _CLOSE_MAP, _OPEN_LIST, _CLOSE_LIST = ord("{"), ord("}"), ord("["), ord("]")
_OPEN_ATTRIBUTES, _CLOSE_ATTRIBUTES = ord("<"), ord(">")
_PAD = 128
_MICROS_PER_SECOND = 1_000_000
_FIRST_ROW_BYTES = 4096
_DATETIMES = ("datetime", "datetime64")
_INTEGERS = {"int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
             "interval": pa.int64(), "interval64": pa.int64(), "uint8": pa.uint8(), "uint16": pa.uint16(),
             "uint32": pa.uint32(), "uint64": pa.uint64(), "date": pa.int32(), "date32": pa.int32(),
             "timestamp": pa.int64(), "timestamp64": pa.int64(), "datetime": pa.int64(), "datetime64": pa.int64()}
#: Lists with more items than this in one row are left to the object path: a round per item costs ~0.1 ms
#: however few rows still have items, so a row with a very long list would cost more than the objects.
MAX_ROUNDS = 1024


class Declined(Exception):
    """The bytes are not in the layout this decoder reads; the object path decodes them."""


class _Bytes:
    """The response as a numpy byte array, padded with zeros (a byte no value starts with) so that a fixed
    window a little past the end stays inside the array. Positions move by data-dependent lengths only in
    `_spans` and `_walk`, which check them against the end; every other step moves them by at most a varint
    or a double past a byte it has checked, and a zero byte read past the end declines the next step."""

    def __init__(self, raw: bytes | bytearray | memoryview):
        self.size = len(raw)
        self.data = np.zeros(self.size + _PAD, np.uint8)
        self.data[:self.size] = np.frombuffer(raw, np.uint8)
        self.buffer = pa.py_buffer(self.data)
        #: The 8 (4) bytes from every position as one little-endian word (overlapping views, no copy).
        self.words = np.ndarray((len(self.data) - 7,), "<u8", self.data, strides=(1,))
        self.words32 = np.ndarray((len(self.data) - 3,), "<u4", self.data, strides=(1,))

    def inside(self, p: np.ndarray) -> None:
        if len(p) and int(p.max()) > self.size:
            raise Declined("a value runs past the end")

    def at(self, p: np.ndarray) -> np.ndarray:
        """The byte at each position."""
        return self.data[p]

    def matches(self, p: np.ndarray, token: bytes) -> np.ndarray:
        """Whether the bytes at each position are `token`, compared 8 bytes at a time."""
        last = len(self.words) - len(token)
        if len(p) and int(p.max()) > last:
            p = np.minimum(p, last)
        same = None
        for k in range(0, len(token), 8):
            chunk = token[k:k + 8]
            got = self.words[p + k if k else p]
            if len(chunk) < 8:
                got &= np.uint64((1 << 8 * len(chunk)) - 1)
            hit = got == np.uint64(int.from_bytes(chunk, "little"))
            same = hit if same is None else same & hit
        return np.ones(len(p), bool) if same is None else same


def _table(*allowed: int) -> np.ndarray:
    """A lookup table over byte values: True for `allowed`."""
    table = np.zeros(256, bool)
    table[list(allowed)] = True
    return table


_INTEGER_MARKERS, _DOUBLE_MARKERS = _table(_ENTITY, _INT64, _UINT64), _table(_ENTITY, _DOUBLE)
_BOOL_MARKERS, _STRING_MARKERS = _table(_ENTITY, _FALSE, _TRUE), _table(_ENTITY, _STRING)
_LIST_MARKERS = _table(_ENTITY, _OPEN_LIST)


#: Decodes the values starting at the given positions: their Arrow array and the position after each.
Decoder = Callable[[_Bytes, np.ndarray], tuple[pa.Array, np.ndarray]]
#: Reads a map's or a list's items from its opening bracket: the items' arrays and the position after each closing.
Inside = Callable[[_Bytes, np.ndarray], tuple[list[pa.Array], np.ndarray]]


def decode_columns(raw: bytes | bytearray | memoryview, columns: Sequence[tuple[str, Any, pa.DataType]],
                   ) -> list[pa.Array]:
    """The arrays of `columns` (name, YT type, Arrow type) read from binary YSON rows; `Declined` where the
    bytes are not laid out as the schemaful writer writes them."""
    buf = _Bytes(raw)
    if buf.size == 0:
        return [pa.array([], arrow) for _, _, arrow in columns]
    keys = _first_row_keys(raw)
    starts = _row_starts(buf, keys[0] if keys else b"")
    wanted = {name.encode(): (type_v3, arrow) for name, type_v3, arrow in columns}
    members = [(key, decoder(*wanted[key]) if key in wanted else _skip) for key in keys]
    arrays, ends = _members(members)(buf, starts)
    after = ends + (buf.data[ends] == _SEMICOLON)
    if not np.array_equal(after[:-1], starts[1:]) or int(after[-1]) != buf.size:
        raise Declined("rows do not follow each other")
    found = dict(zip(keys, arrays, strict=True))
    return [found.get(name.encode(), pa.nulls(len(starts), arrow)) for name, _, arrow in columns]


def _first_row_keys(raw: bytes | bytearray | memoryview) -> list[bytes]:
    """The keys of the first row, in their order, parsed from a prefix of the bytes long enough to hold it."""
    view, length = memoryview(raw), _FIRST_ROW_BYTES
    while True:
        try:
            first = next(iter(bindings.loads(bytes(view[:length]), yson_type="list_fragment", raw=True)))
            break
        except YsonError:
            if length >= len(view):
                raise Declined("the rows are not YSON") from None
            length *= 4
    row = bindings.loads(first, yson_type="list_fragment", always_create_attributes=False, encoding=None)
    row = next(iter(row), None)
    if not isinstance(row, dict):
        raise Declined("a row is not a map")
    return list(row)


def _key_token(key: bytes) -> bytes:
    length, out = 2 * len(key), bytearray([_STRING])
    while True:
        byte, length = length & 0x7F, length >> 7
        out.append(byte | (0x80 if length else 0))
        if not length:
            return bytes(out) + key + b"="


def _row_starts(buf: _Bytes, first_key: bytes) -> np.ndarray:
    """Where each row starts: a `{` at the start or after `;`, followed by the first key. A match inside a
    string is caught afterwards: the rows read from the starts must then end where the next one starts."""
    candidates = np.flatnonzero(buf.data[:buf.size] == _OPEN_MAP)
    candidates = candidates[(candidates == 0) | (buf.data[candidates - 1] == _SEMICOLON)]
    if first_key:
        candidates = candidates[buf.matches(candidates + 1, _key_token(first_key))]
    if not len(candidates) or candidates[0] != 0:
        raise Declined("the first row is not where the rows start")
    return candidates


def decoder(type_v3: Any, arrow: pa.DataType) -> Decoder:
    """The decoder of a column (or a composite's child) of YT type `type_v3` into Arrow type `arrow`."""
    if isinstance(type_v3, str):
        return _scalar(type_v3, arrow)
    name = type_v3["type_name"]
    if name == "tagged" or (name == "optional" and not is_optional(type_v3["item"])):
        return decoder(type_v3["item"], arrow)
    if name == "optional":  # `[value]` or `#`
        return _optional_of_optional(decoder(type_v3["item"], arrow), arrow)
    if name == "list":
        return _list(decoder(type_v3["item"], arrow.value_type), arrow)
    if name == "struct":
        members = [(m["name"].encode(), decoder(m["type"], arrow.field(i).type))
                   for i, m in enumerate(type_v3["members"])]
        return _struct(_members(members), arrow)
    if name == "tuple":
        elements = [decoder(e["type"], arrow.field(i).type) for i, e in enumerate(type_v3["elements"])]
        return _struct(_elements(elements, len(elements)), arrow, _OPEN_LIST)
    if name == "dict":
        key = type_v3["key"]
        keys = _string(arrow.key_type, keys=True) if key in ("string", "utf8") else decoder(key, arrow.key_type)
        return _dict(keys, decoder(type_v3["value"], arrow.item_type), arrow)
    if name == "variant":
        alternatives = variant_alternatives(type_v3)
        children = [decoder(t, arrow.field(i).type) for i, (_, t) in enumerate(alternatives)]
        return _variant([n.encode() for n, _ in alternatives], children, arrow)
    if name == "decimal":
        precision, scale = int(type_v3["precision"]), int(type_v3["scale"])
        strings = _string(pa.binary())
        return lambda buf, p: _mapped(strings(buf, p), lambda a: decimal.from_wire(a, precision, scale, ""))
    return _scalar(name, arrow)


def _mapped(decoded: tuple[pa.Array, np.ndarray], convert: Callable[[pa.Array], pa.Array],
            ) -> tuple[pa.Array, np.ndarray]:
    try:
        return convert(decoded[0]), decoded[1]
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, SchemaError) as e:
        raise Declined(str(e)) from None


def _scalar(name: str, arrow: pa.DataType) -> Decoder:
    if name in ("null", "void"):
        return lambda buf, p: (pa.nulls(len(p)), _skip(buf, p)[1])
    if name in ("yson", "any"):
        return _yson
    if name == "uuid":
        strings = _string(pa.binary())
        return lambda buf, p: _mapped(strings(buf, p), _uuid_text)
    if name in ("double", "float"):
        return _double(arrow)
    if name in ("bool", "boolean"):
        return _bool
    if name in ("string", "utf8", "json"):
        return _string(arrow)
    if name in _INTEGERS:
        return _integer(name, arrow)
    raise Declined(f"type {name}")


def _markers(buf: _Bytes, p: np.ndarray, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each value's first byte, and where it is `#` (null); `Declined` for a byte outside `allowed` (a
    `_table`, `#` included)."""
    m = buf.at(p)
    first = int(m[0]) if len(m) else _ENTITY
    if first != _ENTITY and (m == first).all():  # one kind and no nulls: no lookup per value
        if not allowed[first]:
            raise Declined("a value does not have its column's YSON form")
        return m, np.zeros(len(m), bool)
    if not allowed[m].all():
        raise Declined("a value does not have its column's YSON form")
    return m, m == _ENTITY


_HIGH_BITS = np.uint64(0x8080808080808080)
_HIGH_BITS32, _LOW_BITS32 = np.uint32(0x80808080), np.uint32(0x7F7F7F7F)
_GROUPS32 = [(np.uint32(0x007F007F), np.uint32(0x7F007F00), np.uint32(1)),
             (np.uint32(0x00003FFF), np.uint32(0x3FFF0000), np.uint32(2))]
_GROUPS = [(np.uint64(0x007F007F007F007F), np.uint64(0x7F007F007F007F00), np.uint64(1)),
           (np.uint64(0x00003FFF00003FFF), np.uint64(0x3FFF00003FFF0000), np.uint64(2)),
           (np.uint64(0x000000000FFFFFFF), np.uint64(0x0FFFFFFF00000000), np.uint64(4))]


def _varints(buf: _Bytes, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The unsigned varints starting at `p` and the position after each: up to 4 bytes from one 32-bit word
    where all are that short (values below 2^28: lengths, counters), else up to 8 bytes from one 64-bit word
    (the 7-bit groups packed by shifts), longer ones (values from 2^56) with their 9th and 10th bytes."""
    first = buf.at(p)
    if (first < 0x80).all():  # every value below 128: one byte each (short strings, small numbers)
        return first.astype(np.uint64), p + 1
    if ~buf.words32[p[0]] & _HIGH_BITS32:  # the first ends within 4 bytes: maybe all do
        word32 = buf.words32[p]
        ends32 = ~word32 & _HIGH_BITS32
        if ends32.all():
            keep32 = ends32 ^ (ends32 - np.uint32(1))  # the bytes up to the first that ends a varint
            x32 = word32 & keep32 & _LOW_BITS32
            for low, high, shift in _GROUPS32:
                x32 = (x32 & low) | ((x32 & high) >> shift)
            return x32.astype(np.uint64), p + (np.bitwise_count(keep32) >> np.uint8(3))
    word = buf.words[p]
    ends = ~word & _HIGH_BITS  # the high bit of each byte that ends a varint
    keep = ends ^ (ends - np.uint64(1))  # the bytes up to the first that ends one (all 8 where none does)
    x = word & keep & np.uint64(0x7F7F7F7F7F7F7F7F)
    for low, high, shift in _GROUPS:
        x = (x & low) | ((x & high) >> shift)
    long = ends == 0
    if not long.any():
        return x, p + (np.bitwise_count(keep) >> np.uint8(3))
    if long.all():  # every value from 2^56 (uint64 with the top bit set)
        x, length = _long_varints(buf, p, x)
        return x, p + length
    length = np.bitwise_count(keep).astype(np.int64) >> 3
    x[long], length[long] = _long_varints(buf, p[long], x[long])
    return x, p + length


def _long_varints(buf: _Bytes, p: np.ndarray, low: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Varints of 9 or 10 bytes, whose first 8 bytes' groups are `low`: the 9th and 10th bytes added."""
    ninth, tenth = buf.at(p + 8), buf.at(p + 9)
    nine = ninth < 0x80
    if (~nine & (tenth >= 0x80)).any():
        raise Declined("a varint is longer than 10 bytes")
    values = low | ((ninth & 0x7F).astype(np.uint64) << np.uint64(56))
    values |= np.where(nine, np.uint64(0), (tenth & 0x7F).astype(np.uint64) << np.uint64(63))
    return values, np.where(nine, 9, 10)


def _integer(name: str, arrow: pa.DataType) -> Decoder:
    width = _INTEGERS[name]
    unsigned = pa.types.is_unsigned_integer(width)

    def decode(buf: _Bytes, p: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        m, null = _markers(buf, p, _INTEGER_MARKERS)
        raw, ends = _varints(buf, p + 1)
        signed = m == _INT64
        if signed.all():  # no nulls, int64 tokens only (the bulk of signed columns)
            values, null = unzigzag(raw), None
            wrong = values < 0 if unsigned else None
        else:
            values = np.where(signed, unzigzag(raw), raw.view(np.int64))
            wrong = ((signed & (values < 0)) if unsigned else (~signed & (values < 0))) & ~null
        if wrong is not None and wrong.any():
            raise Declined("an integer out of its column's range")
        wide = pa.array(values.view(np.uint64) if unsigned else values, mask=null)
        try:
            out = wide.cast(width)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise Declined(str(e)) from None
        if name in _DATETIMES:
            out = _mapped((out, ends), lambda a: pc.multiply_checked(a, _MICROS_PER_SECOND))[0]
        if out.type != arrow:
            out = out.view(arrow) if out.type.bit_width == arrow.bit_width else out.cast(arrow)
        return out, ends if null is None else np.where(null, p + 1, ends)
    return decode


def _double(arrow: pa.DataType) -> Decoder:
    def decode(buf: _Bytes, p: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        _, null = _markers(buf, p, _DOUBLE_MARKERS)
        values = buf.words[p + 1].view("<f8")
        if arrow == pa.float32():
            with np.errstate(over="ignore"):
                values = values.astype(np.float32)
        return pa.array(values, arrow, mask=null), np.where(null, p + 1, p + 9)
    return decode


def _bool(buf: _Bytes, p: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    m, null = _markers(buf, p, _BOOL_MARKERS)
    return pa.array(m == _TRUE, mask=null), p + 1


def _spans(buf: _Bytes, starts: np.ndarray, ends: np.ndarray, null: np.ndarray) -> pa.Array:
    """The bytes between each start and end as a binary array (null where `null`): one take of the response
    cut into alternating spans and gaps."""
    bounds = np.empty(2 * len(starts) + 1, np.int64)
    bounds[0] = 0
    bounds[1::2], bounds[2::2] = starts, ends
    buf.inside(ends)
    if (bounds[1:] < bounds[:-1]).any():
        raise Declined("spans overlap or run past the end")
    large = buf.size >= 1 << 31
    offsets = pa.py_buffer(bounds if large else bounds.astype(np.int32))
    cut = pa.Array.from_buffers(pa.large_binary() if large else pa.binary(), len(bounds) - 1,
                                [None, offsets, buf.buffer])
    taken = cut.take(pa.array(np.arange(1, 2 * len(starts), 2), mask=null if null.any() else None))
    return taken.cast(pa.binary()) if large else taken


#: A dict's string keys up to this long are first compared with the first row's: equal in every row (keys are
#: often the same few names), they are written as one value repeated, with no varint or span per row.
_SAME_STRING_BYTES = 14


def _same_strings(buf: _Bytes, p: np.ndarray, arrow: pa.DataType) -> tuple[pa.Array, np.ndarray] | None:
    """The strings at `p` where every one is the same short string as the first (else None): that value
    repeated, and the position after each."""
    head = buf.data[p[0]:p[0] + 2].tobytes()
    if head[0] != _STRING or head[1] >= 0x80 or head[1] & 1 or head[1] >> 1 > _SAME_STRING_BYTES:
        return None
    token = buf.data[p[0]:p[0] + 2 + (head[1] >> 1)].tobytes()
    if not buf.matches(p, token).all():
        return None
    value = token[2:]
    text = arrow == pa.string()
    if text:
        try:
            value.decode()
        except UnicodeDecodeError:
            raise Declined("a string is not UTF-8") from None
    offsets = pa.py_buffer(np.arange(len(p) + 1, dtype=np.int32) * np.int32(len(value)))
    data = pa.py_buffer(np.tile(np.frombuffer(value, np.uint8), len(p)))
    values = pa.Array.from_buffers(pa.string() if text else pa.binary(), len(p), [None, offsets, data])
    if arrow not in (pa.string(), pa.binary()):
        values = _mapped((values, p), lambda a: a.cast(arrow))[0]
    return values, p + len(token)


def _string(arrow: pa.DataType, keys: bool = False) -> Decoder:
    """Strings; with `keys` (a dict's), first tried as one string repeated."""
    def decode(buf: _Bytes, p: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        same = _same_strings(buf, p, arrow) if keys and len(p) else None
        if same is not None:
            return same
        _, null = _markers(buf, p, _STRING_MARKERS)
        raw, starts = _varints(buf, p + 1)
        lengths = unzigzag(raw)
        if null.any():
            lengths[null] = 0
            starts = np.where(null, p + 1, starts)
        if (lengths < 0).any():
            raise Declined("a negative string length")
        ends = starts + lengths
        values = _spans(buf, starts, ends, null)
        if arrow != pa.binary():
            values = _mapped((values, ends), lambda a: a.cast(arrow))[0]
        return values, ends
    return decode


#: Each byte's two hex digits, as the two bytes of a little-endian uint16.
_HEX_PAIRS = np.array([int.from_bytes(f"{b:02x}".encode(), "little") for b in range(256)], np.uint16)
#: The order of the 16 bytes (Python's `bytes_le`) in the text form, and where its dashes go; each of the text's
#: 36 characters as the hex digit of the bytes in wire order it shows (2 per byte, high first; a dash: 0,
#: written over).
_UUID_ORDER = [3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15]
_UUID_DASHES = [8, 13, 18, 23]
_UUID_TEXT = np.zeros(36, np.int64)
_UUID_TEXT[[j for j in range(36) if j not in _UUID_DASHES]] = [2 * _UUID_ORDER[d // 2] + d % 2 for d in range(32)]


def _uuid_text(values: pa.Array) -> pa.Array:
    """16 bytes each (`bytes_le`) -> the text form, as `str(uuid.UUID(bytes_le=...))`."""
    if pc.any(pc.not_equal(pc.binary_length(values), 16)).as_py():
        raise Declined("a uuid of other than 16 bytes")
    valid = values.drop_null()
    if not len(valid):
        return pa.nulls(len(values), pa.string())
    offsets = np.frombuffer(valid.buffers()[1], np.int32)[valid.offset:valid.offset + len(valid) + 1]
    raw = np.frombuffer(valid.buffers()[2], np.uint8)[offsets[0]:offsets[-1]].reshape(-1, 16)
    text = np.take(_HEX_PAIRS, raw).view(np.uint8)[:, _UUID_TEXT]
    text[:, _UUID_DASHES] = ord("-")
    offsets = pa.py_buffer(np.arange(0, 36 * len(valid) + 1, 36, dtype=np.int32))
    strings = pa.Array.from_buffers(pa.string(), len(valid), [None, offsets, pa.py_buffer(text.reshape(-1))])
    if not values.null_count:
        return strings
    index = np.cumsum(np.asarray(values.is_valid())) - 1
    return strings.take(pa.array(index, mask=np.asarray(values.is_null())))


#: The lock-step skipper's tables over a token's first byte: its length where fixed (0: a varint follows, and
#: for a string its bytes), the depth it opens (+1) or closes (-1), and whether it can end a value.
_TOKEN_LENGTH = np.full(256, -1, np.int64)
_TOKEN_LENGTH[[_ENTITY, _FALSE, _TRUE, _SEMICOLON, _EQUALS, _OPEN_MAP, _CLOSE_MAP, _OPEN_LIST, _CLOSE_LIST,
               _OPEN_ATTRIBUTES, _CLOSE_ATTRIBUTES]] = 1
_TOKEN_LENGTH[_DOUBLE] = 9
_TOKEN_LENGTH[[_INT64, _UINT64, _STRING]] = 0
_DEPTH = np.zeros(256, np.int64)
_DEPTH[[_OPEN_MAP, _OPEN_LIST, _OPEN_ATTRIBUTES]] = 1
_DEPTH[[_CLOSE_MAP, _CLOSE_LIST, _CLOSE_ATTRIBUTES]] = -1
_ENDS_VALUE = _table(_ENTITY, _FALSE, _TRUE, _DOUBLE, _INT64, _UINT64, _STRING, _CLOSE_MAP, _CLOSE_LIST)


def _skip(buf: _Bytes, p: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """The position after each whole value (attributes included)."""
    return pa.nulls(len(p)), _walk(buf, p)[0]


def _walk(buf: _Bytes, p: np.ndarray, record: bool = False) -> tuple[np.ndarray, list[yson_text.Round] | None]:
    """The position after each whole value (attributes included), token by token for all rows at once; with
    `record`, the rounds of tokens where every value has one of the same kind in each (else None). While the
    values have tokens of one kind, a round's step is that kind's (no lookup per value)."""
    cur = p.copy()
    rounds: list[yson_text.Round] | None = [] if record else None
    depth = 0
    while len(p):
        m = buf.at(cur)
        kind = int(m[0])
        if not (m == kind).all():
            break
        step = int(_TOKEN_LENGTH[kind])
        if step < 0:
            raise Declined("text YSON")
        payload, number = cur, cur.view(np.uint64)  # kept for strings and integers only
        if step == 0:
            raw, payload = _varints(buf, cur + 1)
            number = raw
            if kind == _STRING:
                length = unzigzag(raw)
                if (length < 0).any():
                    raise Declined("a negative string length")
                number = length.view(np.uint64)
            following = payload + number.view(np.int64) if kind == _STRING else payload
            buf.inside(following)
        else:
            following = cur + step
        if rounds is not None:
            rounds.append(yson_text.Round(kind, cur, payload, number))
        depth += int(_DEPTH[kind])
        if depth < 0:
            raise Declined("unbalanced YSON")
        cur = following
        if depth == 0 and _ENDS_VALUE[kind]:
            return cur, rounds
    return _walk_apart(buf, cur, depth), None


def _walk_apart(buf: _Bytes, p: np.ndarray, depth: int) -> np.ndarray:
    """`_walk` from tokens of differing kinds (all the values `depth` deep), a lookup per value and token."""
    cur, depths = p.copy(), np.full(len(p), depth, np.int64)
    active = np.arange(len(p))
    while len(active):
        c = cur[active]
        buf.inside(c + 1)
        m = buf.at(c)
        step = _TOKEN_LENGTH[m]
        if (step < 0).any():
            raise Declined("text YSON")
        varint = np.flatnonzero(step == 0)
        if len(varint):
            raw, after = _varints(buf, c[varint] + 1)
            length = np.where(m[varint] == _STRING, unzigzag(raw), 0)
            if (length < 0).any():
                raise Declined("a negative string length")
            step[varint] = after + length - c[varint]
        d = depths[active] + _DEPTH[m]
        if (d < 0).any():
            raise Declined("unbalanced YSON")
        cur[active] = c + step
        depths[active] = d
        active = active[~((d == 0) & _ENDS_VALUE[m])]
    buf.inside(cur)
    return cur


def _yson(buf: _Bytes, p: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """Each value as the bindings write it (text YSON, as the object path's `dumps`): written from its tokens
    where the column's values share one shape (`yson_text`), else parsed in one call and written back in one."""
    null = buf.at(p) == _ENTITY
    if not null.any():
        return _yson_present(buf, p)
    present = np.flatnonzero(~null)
    ends = p + 1
    if not len(present):
        return pa.nulls(len(p), pa.binary()), ends
    written, ends[present] = _yson_present(buf, p[present])
    index = np.zeros(len(p), np.int64)
    index[present] = np.arange(len(present))
    return written.take(pa.array(index, mask=null)), ends


def _yson_present(buf: _Bytes, p: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """`_yson` of values none of which is `#`."""
    ends, rounds = _walk(buf, p, record=True)
    written = None
    if rounds:
        no_nulls = np.zeros(len(p), bool)
        written = yson_text.write(buf.data, buf.matches, rounds, lambda a, b: _spans(buf, a, b, no_nulls))
    return (_dumped(buf, p, ends) if written is None else written), ends


def _dumped(buf: _Bytes, p: np.ndarray, ends: np.ndarray) -> pa.Array:
    """The values between `p` and `ends` parsed in one call and written back as text in one call, the written
    fragment cut where each value ends."""
    spans = _spans(buf, p, ends, np.zeros(len(p), bool))
    one_list = pa.ListArray.from_arrays(pa.array([0, len(spans)], pa.int32()), spans)
    joined = pc.binary_join(one_list, b";")[0].as_py() + b";"
    values = list(bindings.loads(joined, yson_type="list_fragment", always_create_attributes=False, encoding=None))
    text = bindings.dumps(values, yson_type="list_fragment")  # `value;\n` each: no raw newline inside text YSON
    data = np.frombuffer(text, np.uint8)
    stops = np.flatnonzero(data == ord("\n"))
    if len(stops) != len(p) or len(values) != len(p):
        raise Declined("a yson value is not one node")
    bounds = np.zeros(len(stops) + 1, np.int64)
    bounds[1:] = stops + 1
    starts = bounds[:-1]
    return _spans(_Bytes(text), starts, starts + np.diff(bounds) - 2, np.zeros(len(starts), bool))


def _expect(buf: _Bytes, p: np.ndarray, byte: int) -> np.ndarray:
    if not (buf.at(p) == byte).all():
        raise Declined(f"expected {chr(byte)!r}")
    return p + 1


def _after_item(buf: _Bytes, p: np.ndarray, closer: int) -> np.ndarray:
    """Past the `;` after an item, which may be left out before the closing bracket."""
    semicolon = buf.at(p) == _SEMICOLON
    if semicolon.all():
        return p + 1
    if not (semicolon | (buf.at(p) == closer)).all():
        raise Declined("items are not separated by ';'")
    return p + semicolon


def _subset(decode: Decoder, buf: _Bytes, p: np.ndarray, rows: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """`decode` at the positions of `rows` (a mask) only: an array with nulls elsewhere, and the ends there."""
    if rows.all():
        return decode(buf, p)
    picked = np.flatnonzero(rows)
    values, ends = decode(buf, p[picked])
    out = p.copy()
    out[picked] = ends
    if len(picked) == len(p):
        return values, out
    index = np.zeros(len(p), np.int64)
    index[picked] = np.arange(len(picked))
    return values.take(pa.array(index, mask=~rows)), out




def _members(members: Sequence[tuple[bytes, Decoder]]) -> Inside:
    """A map's keyed items in the given order, each maybe absent (null), from `{` to after `}`. Where an item is
    in every row, the `;` after it and the next key are compared as one token."""
    tokens = [_key_token(key) for key, _ in members]

    def decode(buf: _Bytes, p: np.ndarray) -> tuple[list[pa.Array], np.ndarray]:
        cur = _expect(buf, p, _OPEN_MAP)
        arrays = []
        pending = False  # `cur` is at the end of an item in every row, before its `;` or the `}`
        for token, (_, child) in zip(tokens, members, strict=True):
            if pending:
                if buf.matches(cur, b";" + token).all():
                    values, cur = child(buf, cur + 1 + len(token))
                    arrays.append(values)
                    continue
                cur = _after_item(buf, cur, _CLOSE_MAP)
            present = buf.matches(cur, token)
            values, ends = _subset(child, buf, cur + len(token), present)
            arrays.append(values)
            pending = bool(present.all())
            if pending:
                cur = ends
            else:
                cur = cur.copy()
                cur[present] = _after_item(buf, ends[present], _CLOSE_MAP)
        if pending:
            cur = _after_item(buf, cur, _CLOSE_MAP)
        return arrays, _expect(buf, cur, _CLOSE_MAP)
    return decode


def _elements(elements: Sequence[Decoder], count: int) -> Inside:
    """A list of exactly `count` items of the given decoders, from `[` to after `]`."""
    def decode(buf: _Bytes, p: np.ndarray) -> tuple[list[pa.Array], np.ndarray]:
        cur = _expect(buf, p, _OPEN_LIST)
        if not count:
            return [], _expect(buf, cur, _CLOSE_LIST)
        arrays = []
        for child in elements[:count - 1]:
            values, ends = child(buf, cur)
            arrays.append(values)
            cur = _after_item(buf, ends, _CLOSE_LIST)
        values, ends = elements[count - 1](buf, cur)
        arrays.append(values)
        if buf.matches(ends, b";]").all():  # as the writer ends a list: the last item's `;` and `]` in one
            return arrays, ends + 2
        return arrays, _expect(buf, _after_item(buf, ends, _CLOSE_LIST), _CLOSE_LIST)
    return decode


def _struct(inside: Inside, arrow: pa.DataType,
            opener: int = _OPEN_MAP) -> Decoder:
    """Structs (`inside` = members by name) and tuples (elements by position); `#` is null."""
    markers = _table(_ENTITY, opener)

    def decode(buf: _Bytes, p: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        _, null = _markers(buf, p, markers)
        if not null.any():
            arrays, ends = inside(buf, p)
            return pa.StructArray.from_arrays(arrays, fields=list(arrow)), ends
        present = ~null
        picked = np.flatnonzero(present)
        arrays, ends = inside(buf, p[picked])
        out = p + 1
        out[picked] = ends
        if len(picked) < len(p):
            index = pa.array(np.cumsum(present) - 1, mask=null)
            arrays = [a.take(index) for a in arrays]
        return pa.StructArray.from_arrays(arrays, fields=list(arrow), mask=pa.array(null) if null.any() else None), out
    return decode


def _rounds(item: Decoder, item_type: pa.DataType, buf: _Bytes, p: np.ndarray
            ) -> tuple[np.ndarray, pa.Array, np.ndarray, np.ndarray]:
    """A list per row (or `#`): the offsets, the items of all rows in row order, the nulls and the ends."""
    _, null = _markers(buf, p, _LIST_MARKERS)
    cur = p + 1
    active = np.flatnonzero(~null)
    whole = len(active) == len(p)  # every row still has items: its positions are `cur` itself, no gather
    pieces, owners = [], []
    for _ in range(MAX_ROUNDS + 1):
        more = buf.at(cur if whole else cur[active]) != _CLOSE_LIST
        if not (whole and more.all()):
            active, whole = active[more], False
        if not len(active):
            break
        values, ends = item(buf, cur if whole else cur[active])
        pieces.append(values)
        owners.append(active)
        if whole:
            cur = _after_item(buf, ends, _CLOSE_LIST)
        else:
            cur[active] = _after_item(buf, ends, _CLOSE_LIST)
    else:
        raise Declined("a list longer than MAX_ROUNDS items")
    offsets = np.zeros(len(p) + 1, np.int64)
    if not owners:
        return offsets, pa.array([], item_type), null, np.where(null, p + 1, cur + 1)
    if len(owners[-1]) == len(owners[0]):  # the rows with items all have as many: round-major is a transpose
        offsets[1:][owners[0]] = len(owners)
        np.cumsum(offsets, out=offsets)
        order = np.arange(int(offsets[-1])).reshape(len(owners), -1).T.ravel()
    else:  # a row's items are its first rounds: its count is the rounds it was in; item k goes to offsets[r] + k
        np.cumsum(np.bincount(np.concatenate(owners), minlength=len(p)), out=offsets[1:])
        order = np.empty(int(offsets[-1]), np.int64)
        order[np.concatenate([offsets[rows] + k for k, rows in enumerate(owners)])] = np.arange(len(order))
    items = pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces).take(pa.array(order))
    return offsets, items, null, np.where(null, p + 1, cur + 1)


def _list(item: Decoder, arrow: pa.DataType) -> Decoder:
    def decode(buf: _Bytes, p: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        offsets, items, null, ends = _rounds(item, arrow.value_type, buf, p)
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), items, type=arrow,
                                        mask=pa.array(null) if null.any() else None), ends
    return decode


def _dict(key: Decoder, value: Decoder, arrow: pa.DataType) -> Decoder:
    """`[[key;value];...]` into a map array."""
    pair_type = pa.struct([pa.field("k", arrow.key_type), pa.field("v", arrow.item_type)])
    pair = _struct(_elements([key, value], 2), pair_type, _OPEN_LIST)

    def decode(buf: _Bytes, p: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        offsets, pairs, null, ends = _rounds(pair, pair_type, buf, p)
        if pairs.null_count:
            raise Declined("a dict's pair is null")
        return pa.MapArray.from_arrays(pa.array(offsets.astype(np.int32)), pairs.field(0), pairs.field(1),
                                       type=arrow, mask=pa.array(null) if null.any() else None), ends
    return decode


def _variant(names: Sequence[bytes], children: Sequence[Decoder], arrow: pa.DataType) -> Decoder:
    """`[name or index;value]` into a struct whose one non-null field is the alternative held."""
    tokens = [_key_token(n)[:-1] for n in names]

    def decode(buf: _Bytes, p: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        _, null = _markers(buf, p, _LIST_MARKERS)
        present = None if not null.any() else ~null  # None: every row (no mask to apply)
        tag = p + 1
        m = buf.at(tag)
        held = np.full(len(p), -1, np.int64)
        value_at = tag
        by_index = (m == _INT64) | (m == _UINT64)
        if present is not None:
            by_index &= present
        if by_index.any():
            index, after = _varints(buf, tag + 1)
            held[by_index] = np.where(m == _INT64, unzigzag(index), index.view(np.int64))[by_index]
            value_at = np.where(by_index, after, tag)
        for i, token in enumerate(tokens):
            named = buf.matches(tag, token)  # the token starts with the string marker
            if present is not None:
                named &= present
            held[named] = i
            value_at = np.where(named, tag + len(token), value_at)
        unknown = held < 0 if present is None else (held < 0) & present
        if unknown.any() or (held >= len(children)).any():
            raise Declined("a variant's alternative is unknown")
        value_at = _expect_where(buf, value_at, ~null, _SEMICOLON)
        arrays, out = [], p + 1
        for i, child in enumerate(children):
            rows = held == i
            values, ends = _subset(child, buf, value_at, rows)
            arrays.append(values)
            out = np.where(rows, ends, out)
        out = _expect_where(buf, out, ~null, _CLOSE_LIST, optional_semicolon=True)
        return pa.StructArray.from_arrays(arrays, fields=list(arrow),
                                          mask=pa.array(null) if null.any() else None), out
    return decode


def _expect_where(buf: _Bytes, p: np.ndarray, rows: np.ndarray, byte: int, optional_semicolon: bool = False
                  ) -> np.ndarray:
    """Past `byte` at `p` in `rows` (after an optional `;` first where asked); other rows unchanged."""
    if rows.all():  # no null among the values: no subset
        q = p + (buf.at(p) == _SEMICOLON) if optional_semicolon else p
        if not (buf.at(q) == byte).all():
            raise Declined(f"expected {chr(byte)!r}")
        return q + 1
    q = p.copy()
    if optional_semicolon:
        q[rows] += buf.at(q[rows]) == _SEMICOLON
    if not (buf.at(q[rows]) == byte).all():
        raise Declined(f"expected {chr(byte)!r}")
    q[rows] += 1
    return q


def _optional_of_optional(item: Decoder, arrow: pa.DataType) -> Decoder:
    """`[value]` (the value may be `#`) or `#`: Arrow has one null for both."""
    def decode(buf: _Bytes, p: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        _, null = _markers(buf, p, _LIST_MARKERS)
        values, ends = _subset(item, buf, p + 1, ~null)
        ends = np.where(null, p + 1, _expect_where(buf, ends, ~null, _CLOSE_LIST, optional_semicolon=True))
        return values, ends
    return decode
