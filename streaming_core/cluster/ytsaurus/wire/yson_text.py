"""Binary YSON values that share one shape -> the text the bindings write (`bindings.dumps(value)`), for all the
values of a column at once with numpy and Arrow kernels, without a parser call per value.

`yson_columns` steps through a `yson` column's values token by token in lock step (one round: the next token of
every value). Where every round holds the same kind of token in every value (the values have one shape: the
same maps with the same keys, lists of the same lengths, scalars of the same types: the common case of a column
written by one program), the text is a template: constant runs (brackets, keys, `=`, `;`, strings equal in
every value, `%true`, `#`) between the parts that differ from value to value (strings and integers). The
template is checked against YSON's grammar once, in Python; the varying parts become Arrow arrays (strings: a take
of the response's spans; integers: Arrow's cast to decimal text), and one `binary_join_element_wise` joins them
with the constant runs into the values' texts.

The bindings' text form, which this writes byte for byte: structural bytes as they are, `;` after every item of
a map or list (the last one included), strings (map keys too) in double quotes with every byte outside
printable ASCII, `"` and `\\` escaped (a constant string, and the varying strings of a part holding such a
byte, are written by the bindings themselves, in one call for the part), int64 in decimal, uint64 in decimal
with a `u`, `%true`, `%false`, `#`. `write` returns None (the caller then parses and writes the values with the
bindings) where the values do not share a shape, or hold what it does not write exactly: doubles (their
shortest round-trip form), attributes (empty ones are dropped), a map key that differs between values, a key
twice in a map (the bindings keep the last), or tokens out of YSON's grammar (the bindings then name the error).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import bindings

_STRING, _INT64, _FALSE, _TRUE, _UINT64 = 0x01, 0x02, 0x04, 0x05, 0x06
_SCALARS = {_STRING: None, _INT64: None, _UINT64: None, _FALSE: b"%false", _TRUE: b"%true", ord("#"): b"#"}
_OPENERS = {ord("{"): "map", ord("["): "list"}
_CLOSERS = {ord("}"): "map", ord("]"): "list"}
#: Bytes the bindings write escaped inside a string.
_ESCAPED = np.ones(256, bool)
_ESCAPED[0x20:0x7F] = False
_ESCAPED[[ord('"'), ord("\\")]] = True


class Round(NamedTuple):
    """One token of every value: its first byte (the same in all), and per value where it starts, where a
    string's bytes start, and a string's length or an integer's raw varint (for other tokens: anything)."""

    marker: int
    at: np.ndarray
    payload: np.ndarray
    number: np.ndarray


#: Whether the bytes at each position are the given token (`_Bytes.matches`).
Matches = Callable[[np.ndarray, bytes], np.ndarray]
#: The bytes between each start and end of the response as a binary array (`_spans`).
Spans = Callable[[np.ndarray, np.ndarray], pa.Array]


def unzigzag(u: np.ndarray) -> np.ndarray:
    return (u >> np.uint64(1)).view(np.int64) ^ -(u & np.uint64(1)).view(np.int64)


def write(data: np.ndarray, matches: Matches, rounds: Sequence[Round], spans: Spans) -> pa.Array | None:
    """The values' text as a binary array, or None where it is not written here."""
    template = _template(data, matches, rounds)
    if template is None:
        return None
    parts = [_varying(rounds[p], spans) if isinstance(p, int) else pa.scalar(p, pa.binary()) for p in template]
    for i, p in enumerate(template):
        if isinstance(p, int) and rounds[p].marker == _STRING and _escapes(parts[i]):
            parts[i] = _escaped(parts[i])
    if len(parts) == 1 and isinstance(parts[0], pa.Scalar):
        return pa.repeat(parts[0], len(rounds[0].at))
    return pc.binary_join_element_wise(*parts, b"")


def _template(data: np.ndarray, matches: Matches, rounds: Sequence[Round]) -> list[bytes | int] | None:
    """The values' text as constant runs and the rounds whose text varies (their index), or None where the
    tokens are out of YSON's grammar or hold what `write` does not write."""
    parts: list[bytes | int] = []
    stack: list[tuple[str, set[bytes]]] = []
    expect = "value"  # value, key (or `}`), item (or `]`), equals, next (`;` or a closer), done
    for k, r in enumerate(rounds):
        m = r.marker
        if (m in _SCALARS and expect in ("value", "item")) or (m == _STRING and expect == "key"):
            text = _constant(data, matches, r) if m == _STRING else _SCALARS[m]
            if expect == "key":
                if text is None or text in stack[-1][1]:
                    return None
                stack[-1][1].add(text)
            if text is not None:
                parts.append(text)
            else:
                quote = b'"' if m == _STRING else b""
                parts += [quote, k, b"u" if m == _UINT64 else quote]
            expect = "equals" if expect == "key" else _after_value(stack)
        elif m in _OPENERS and expect in ("value", "item"):
            stack.append((_OPENERS[m], set()))
            parts.append(bytes([m]))
            expect = "key" if m == ord("{") else "item"
        elif m == ord("=") and expect == "equals":
            parts.append(b"=")
            expect = "value"
        elif m == ord(";") and expect == "next":
            parts.append(b";")
            expect = "key" if stack[-1][0] == "map" else "item"
        elif m in _CLOSERS and stack and stack[-1][0] == _CLOSERS[m] and expect in ("key", "item", "next"):
            parts.append(b";" + bytes([m]) if expect == "next" else bytes([m]))
            stack.pop()
            expect = _after_value(stack)
        else:
            return None
    if expect != "done":
        return None
    merged: list[bytes | int] = []
    for part in parts:
        if part == b"":
            continue
        if isinstance(part, bytes) and merged and isinstance(merged[-1], bytes):
            merged[-1] += part
        else:
            merged.append(part)
    return merged


def _escapes(strings: pa.Array) -> bool:
    """Whether varying strings hold a byte the bindings escape (constants are written by the bindings)."""
    data = strings.buffers()[2]
    return data is not None and bool(_ESCAPED[np.frombuffer(data, np.uint8)].any())


def _escaped(strings: pa.Array) -> pa.Array:
    """Strings as the bindings write them, escapes and all, without their quotes: written in one call."""
    text = bindings.dumps(strings.to_pylist(), yson_type="list_fragment")  # `"...";\n` each
    return pa.array([line[1:-2] for line in text.split(b"\n")[:-1]], pa.binary())


def _after_value(stack: list[tuple[str, set[bytes]]]) -> str:
    return "next" if stack else "done"


def _constant(data: np.ndarray, matches: Matches, r: Round) -> bytes | None:
    """The text of a string the same in every value (written by the bindings), or None where it varies."""
    first = int(r.at[0]), int(r.payload[0]) + int(r.number[0])
    token = data[first[0]:first[1]].tobytes()
    if not matches(r.at, token).all():
        return None
    return bindings.dumps(token[int(r.payload[0]) - first[0]:])


def _varying(r: Round, spans: Spans) -> pa.Array:
    """A round's text that differs between values."""
    if r.marker == _STRING:
        return spans(r.payload, r.payload + r.number.astype(np.int64))
    return pa.array(unzigzag(r.number) if r.marker == _INT64 else r.number).cast(pa.string()).cast(pa.binary())
