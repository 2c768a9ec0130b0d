"""YTsaurus' binary decimal (`decimal_mode=binary`), a whole column at a time.

A `decimal(p, s)` travels as a YSON string of 4, 8 or 16 bytes (p up to 9, 18, 38): the unscaled integer,
big-endian two's complement, with its top bit flipped so that byte order is numeric order (YTsaurus docs,
"Data types", decimal). Arrow's decimal128 is the same integer in 16 bytes, little-endian: both directions
are numpy byte shuffles over the column (or, decoding 4 and 8 bytes, one big-endian integer each). The top
values of each width stand for nan, +inf and -inf (INT_MAX, INT_MAX - 1, -(INT_MAX - 1)); they have no Arrow
decimal and are refused.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import SchemaError

_ARROW_BYTES = 16


def wire_width(precision: int) -> int:
    """Bytes of YTsaurus' binary decimal for a precision (only up to decimal128's 38 digits)."""
    for digits, width in ((9, 4), (18, 8), (38, 16)):
        if 1 <= precision <= digits:
            return width
    raise SchemaError(f"decimal precision {precision} is outside 1..38")


def _arrow_words(arr: pa.Array) -> np.ndarray:
    """The 16 little-endian bytes of each value of a decimal128 array (rows of a (n, 16) view)."""
    start = arr.offset * _ARROW_BYTES
    raw = np.frombuffer(arr.buffers()[1], np.uint8)[start:start + len(arr) * _ARROW_BYTES]
    return raw.reshape(len(arr), _ARROW_BYTES)


def to_wire(arr: pa.Array, precision: int, scale: int, where: str) -> np.ndarray:
    """The wire bytes of every value of a decimal128(precision, scale) array, as rows of a (n, width) array
    (a null's row is meaningless). `SchemaError` for a value wider than the precision allows."""
    width = wire_width(precision)
    big_endian = _arrow_words(arr)[:, ::-1]
    head, value = big_endian[:, :_ARROW_BYTES - width], big_endian[:, _ARROW_BYTES - width:]
    extension = np.where(value[:, 0] >= 0x80, 0xFF, 0).astype(np.uint8)
    fits = (head == extension[:, None]).all(axis=1)
    if arr.null_count:
        fits |= ~np.asarray(arr.is_valid())
    if not fits.all():
        row = int(np.argmin(fits))
        raise SchemaError(f"{where}: row {row}: value {arr[row].as_py()} does not fit decimal({precision}, {scale})")
    wire = value.copy()
    wire[:, 0] ^= 0x80
    return wire


def from_wire(values: pa.Array, precision: int, scale: int, where: str) -> pa.Array:
    """A decimal128(precision, scale) array from a binary array of wire values (nulls stay null)."""
    width = wire_width(precision)
    lengths = pc.binary_length(values)
    wrong = pc.not_equal(lengths, width)
    if pc.any(wrong).as_py():
        row = pc.index(wrong, True).as_py()
        raise SchemaError(f"{where}: row {row}: binary decimal({precision}, {scale}) of "
                          f"{lengths[row].as_py()} bytes, expected {width}")
    offsets = np.frombuffer(values.buffers()[1], np.int32)[values.offset:values.offset + len(values) + 1]
    data = np.frombuffer(values.buffers()[2], np.uint8)[offsets[0]:offsets[-1]]
    convert = _from_words if width < _ARROW_BYTES else _from_bytes
    little = convert(data, width, precision, scale, where)
    if not values.null_count:
        return pa.Array.from_buffers(pa.decimal128(precision, scale), len(values), [None, pa.py_buffer(little)])
    valid = np.asarray(values.is_valid())
    full = np.zeros((len(values), _ARROW_BYTES), np.uint8)
    full[valid] = little
    bitmap = pa.array(valid).buffers()[1]
    return pa.Array.from_buffers(pa.decimal128(precision, scale), len(values), [bitmap, pa.py_buffer(full)],
                                 null_count=values.null_count)


def _from_words(data: np.ndarray, width: int, precision: int, scale: int, where: str) -> np.ndarray:
    """`_from_bytes` of 4- or 8-byte values, each read as one big-endian integer."""
    bits = 8 * width
    value = (data.view(f">u{width}") ^ (1 << bits - 1)).astype(np.uint64)
    value = (value << np.uint64(64 - bits)).view(np.int64) >> np.int64(64 - bits)  # sign-extended
    top = (1 << bits - 1) - 1
    if ((value >= top - 1) | (value <= 1 - top)).any():
        _from_bytes(data, width, precision, scale, where)  # refuses the nan or infinity, naming it
    little = np.empty((len(value), 2), np.int64)
    little[:, 0], little[:, 1] = value, value >> np.int64(63)
    return little.view(np.uint8)


def _from_bytes(data: np.ndarray, width: int, precision: int, scale: int, where: str) -> np.ndarray:
    """The decimal128 rows (n, 16 little-endian bytes) of wire values of `width` bytes, one after another."""
    present = data.reshape(-1, width).copy()
    present[:, 0] ^= 0x80
    _refuse_special(present, precision, scale, where)
    little = np.empty((len(present), _ARROW_BYTES), np.uint8)
    little[:, :width] = present[:, ::-1]
    little[:, width:] = np.where(present[:, :1] >= 0x80, 0xFF, 0)
    return little


def _refuse_special(present: np.ndarray, precision: int, scale: int, where: str) -> None:
    """nan (INT_MAX), +inf (INT_MAX - 1) and -inf (-(INT_MAX - 1)), and the values beyond them, in two's
    complement big-endian rows: 7F FF .. FF FE/FF above, 80 00 .. 00 00/01/02 below."""
    middle = present[:, 1:-1]
    high = (present[:, 0] == 0x7F) & (middle == 0xFF).all(axis=1) & (present[:, -1] >= 0xFE)
    low = (present[:, 0] == 0x80) & (middle == 0).all(axis=1) & (present[:, -1] <= 0x02)
    if (high | low).any():
        raise SchemaError(f"{where}: decimal({precision}, {scale}) nan or infinity has no Arrow representation")
