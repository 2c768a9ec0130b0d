"""YT values as JSON, both ways, by column type: the rows `opsd queue produce` reads and `opsd table read
--json` prints, so that one command's output is the other's input.

Input takes YTsaurus' own JSON forms and the friendlier ones people type:
- `dict`: an object, or YTsaurus' list of `[key, value]` pairs;
- `tuple`: a list of its elements, or an object `{"_1": ..., "_2": ...}`;
- `variant`: `[alternative, value]`, the alternative by name (over a struct) or index (over a tuple);
- `date`, `datetime`, `timestamp` and their 32/64 forms: ISO text, or the number of days / seconds /
  microseconds since the epoch; `interval`: microseconds;
- `decimal`: text (exact) or a number; `yson` / `any`: any JSON value; `json`: text as is, or any other
  JSON value, which is serialized.
Output is one form per type: pairs for dicts, lists for tuples, `[alternative, value]` for variants, ISO text
for dates and times, text for decimals.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Callable, Mapping
from typing import Any

from yt import yson
from yt.yson.convert import yson_to_json

from streaming_core.cluster import TableSchema
from streaming_core.cluster.schema import VARIANT_PREFIX, variant_alternatives

Convert = Callable[[Any], Any]

_EPOCH_DAY = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_DATES = ("date", "date32")
_DATETIMES = ("datetime", "datetime64")
_TIMESTAMPS = ("timestamp", "timestamp64")
_YSON = ("yson", "any")


def row_decoder(schema: TableSchema) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """A function turning one JSON row into the Python values the cluster takes; `ValueError` names the column.

    Columns the schema does not know pass unchanged, for the cluster to reject with its own message.
    """
    decoders = {c.name: decoder(c.type_v3) for c in schema.columns}

    def decode(row: Mapping[str, Any]) -> dict[str, Any]:
        out = {}
        for name, value in row.items():
            try:
                out[name] = decoders[name](value) if name in decoders and value is not None else value
            except (ValueError, TypeError, KeyError, IndexError, decimal.InvalidOperation) as e:
                raise ValueError(f"column {name!r}: {value!r} is not a {_type_text(schema, name)} ({e})") from None
        return out
    return decode


def row_encoder(schema: TableSchema) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """A function turning one row as Arrow gives it (`to_pylist()`) into JSON values (see the module doc)."""
    encoders = {c.name: encoder(c.type_v3) for c in schema.columns}
    return lambda row: {k: None if v is None else encoders.get(k, _same)(v) for k, v in row.items()}


def _type_text(schema: TableSchema, name: str) -> str:
    return json.dumps(schema.column(name).type_v3)


# -- JSON -> Python (what pyarrow takes for the column's Arrow type) ---------------------------------------


def decoder(type_v3: Any) -> Convert:
    name = type_v3 if isinstance(type_v3, str) else type_v3["type_name"]
    if name in ("optional", "tagged"):
        return _nullable(decoder(type_v3["item"]))
    if name in _SCALAR_DECODERS:
        return _SCALAR_DECODERS[name]
    if name == "decimal":
        return lambda v: decimal.Decimal(str(v))
    if name == "list":
        item = decoder(type_v3["item"])
        return lambda v: [item(x) for x in _json_list(v)]
    if name == "struct":
        members = [(m["name"], decoder(m["type"])) for m in type_v3["members"]]
        return lambda v: {n: _maybe(d, _json_object(v).get(n)) for n, d in members}
    if name == "tuple":
        return _tuple_decoder([decoder(e["type"]) for e in type_v3["elements"]])
    if name == "dict":
        return _dict_decoder(decoder(type_v3["key"]), decoder(type_v3["value"]), type_v3["key"])
    if name == "variant":
        return _variant_decoder(type_v3)
    return lambda v: v


def _nullable(convert: Convert) -> Convert:
    return lambda v: None if v is None else convert(v)


def _maybe(convert: Convert, value: Any) -> Any:
    return None if value is None else convert(value)


def _json_list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"expected a JSON list, got {type(value).__name__}")
    return value


def _json_object(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"expected a JSON object, got {type(value).__name__}")
    return value


def _tuple_decoder(elements: list[Convert]) -> Convert:
    names = [f"_{i + 1}" for i in range(len(elements))]

    def decode(value: Any) -> dict[str, Any]:
        if isinstance(value, Mapping):
            return {n: _maybe(d, value.get(n)) for n, d in zip(names, elements, strict=True)}
        items = _json_list(value)
        if len(items) != len(elements):
            raise ValueError(f"a tuple of {len(elements)} elements, got {len(items)}")
        return {n: _maybe(d, x) for n, d, x in zip(names, elements, items, strict=True)}
    return decode


def _dict_decoder(key: Convert, value: Convert, key_type: Any) -> Convert:
    """An object or a list of `[key, value]` pairs, as `(key, value)` tuples (the only form pyarrow takes)."""
    text_keys = key_type in ("string", "utf8")

    def decode(v: Any) -> list[tuple[Any, Any]]:
        if isinstance(v, Mapping):
            pairs = [(k if text_keys else json.loads(k), x) for k, x in v.items()]
        else:
            pairs = [_pair(p) for p in _json_list(v)]
        return [(key(k), _maybe(value, x)) for k, x in pairs]
    return decode


def _pair(item: Any) -> tuple[Any, Any]:
    if not (isinstance(item, list) and len(item) == 2):
        raise ValueError(f"dict entries are [key, value] pairs, got {item!r}")
    return item[0], item[1]


def _variant_decoder(type_v3: Mapping[str, Any]) -> Convert:
    """`[alternative, value]` as the struct with that one field set (see `cluster.schema.variant_alternatives`)."""
    alternatives = variant_alternatives(type_v3)
    decoders = {n: decoder(t) for n, t in alternatives}
    by_struct = "members" in type_v3

    def decode(value: Any) -> dict[str, Any]:
        tag, item = _pair(value) if isinstance(value, list) else (None, None)
        name = tag if by_struct else f"_{int(tag) + 1}" if isinstance(tag, int) else None
        if name not in decoders:
            raise ValueError(f"a variant is [alternative, value] with alternative one of "
                             f"{[n for n, _ in alternatives] if by_struct else list(range(len(alternatives)))}")
        return {VARIANT_PREFIX + n: _maybe(decoders[n], item) if n == name else None for n in decoders}
    return decode


def _date(value: Any) -> Any:
    return dt.date.fromisoformat(value) if isinstance(value, str) else _int(value)


def _instant(unit_micros: int) -> Convert:
    """ISO text (UTC unless it says otherwise) or a number of `unit_micros` since the epoch, as microseconds."""
    def decode(value: Any) -> Any:
        if isinstance(value, str):
            parsed = dt.datetime.fromisoformat(value)
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
        return _int(value) * unit_micros
    return decode


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {type(value).__name__}")
    return value


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


_SCALAR_DECODERS: dict[str, Convert] = {
    **{t: _date for t in _DATES}, **{t: _instant(1_000_000) for t in _DATETIMES},
    **{t: _instant(1) for t in _TIMESTAMPS}, **{t: (lambda v: yson.dumps(v, yson_format="binary")) for t in _YSON},
    "json": _json_text, "null": lambda v: None, "void": lambda v: None,
}


# -- Python (Arrow's `to_pylist`) -> JSON ------------------------------------------------------------------


def encoder(type_v3: Any) -> Convert:
    name = type_v3 if isinstance(type_v3, str) else type_v3["type_name"]
    if name in ("optional", "tagged"):
        return _nullable(encoder(type_v3["item"]))
    if name in _YSON:
        return lambda v: yson_to_json(yson.loads(v))
    if name in (*_DATES, *_DATETIMES, *_TIMESTAMPS):
        return lambda v: v.isoformat()
    if name == "decimal":
        return str
    if name == "list":
        item = encoder(type_v3["item"])
        return lambda v: [_maybe(item, x) for x in v]
    if name == "struct":
        members = [(m["name"], encoder(m["type"])) for m in type_v3["members"]]
        return lambda v: {n: _maybe(e, v.get(n)) for n, e in members}
    if name == "tuple":
        elements = [encoder(e["type"]) for e in type_v3["elements"]]
        return lambda v: [_maybe(e, v.get(f"_{i + 1}")) for i, e in enumerate(elements)]
    if name == "dict":
        key, value = encoder(type_v3["key"]), encoder(type_v3["value"])
        return lambda v: [[_maybe(key, k), _maybe(value, x)] for k, x in v]
    if name == "variant":
        return _variant_encoder(type_v3)
    return _same


def _same(value: Any) -> Any:
    return value


def _variant_encoder(type_v3: Mapping[str, Any]) -> Convert:
    alternatives = variant_alternatives(type_v3)
    encoders = [(VARIANT_PREFIX + n, n if "members" in type_v3 else i, encoder(t))
                for i, (n, t) in enumerate(alternatives)]

    def encode(value: Mapping[str, Any]) -> list[Any] | None:
        for field, tag, convert in encoders:
            if value.get(field) is not None:
                return [tag, convert(value[field])]
        return [encoders[0][1], None] if encoders else None
    return encode

