"""Immutable values inside the frozen results: read-only mappings (`frozen_mapping`), JSON values frozen all the way
down (`frozen_json`: objects as read-only mappings, arrays as tuples) and the type of such a value (`JsonValue`), for
the parts of a result that are JSON by nature (what a decision was made from, a history entry's values, the Queue
Agent's attributes), and the words of enums read back from documents. A result is frozen; a dict inside it could
still change under a reader on another thread."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping, Sequence
from enum import Enum
from types import MappingProxyType
from typing import Any, TypeAlias, TypeVar

#: A JSON value: a scalar, an array (a tuple once frozen) or an object with string keys.
JsonValue: TypeAlias = str | int | float | bool | Sequence["JsonValue"] | Mapping[str, "JsonValue"] | None

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")


def frozen_mapping(values: Mapping[K, V]) -> Mapping[K, V]:
    """A read-only copy of a mapping (the mapping itself when it is read-only already)."""
    return values if isinstance(values, MappingProxyType) else MappingProxyType(dict(values))


def frozen_json(value: JsonValue) -> JsonValue:
    """A JSON value with its objects read-only and its arrays tuples, at every depth."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): frozen_json(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(frozen_json(v) for v in value)
    return value


def in_words(kind: type[Enum], value: str) -> str:
    """A member of a worded enum (one with `words`: a desync state, a tuner's reason) read from a document
    (`/status`, a history row) in words; a value this version does not know (a newer daemon's), as it is."""
    return kind(value).words if value in kind._value2member_map_ else value  # type: ignore[attr-defined]


#: How `jsonable` writes an infinite float, which JSON cannot carry, and `json_number` reads it back.
INFINITIES = {"+Inf": math.inf, "-Inf": -math.inf}


def json_number(value: Any) -> Any:
    """A number of a document `jsonable` made (a daemon's `/status`), with infinities as floats again."""
    return INFINITIES.get(value, value) if isinstance(value, str) else value


def parsed(hint: Any, value: Any) -> Any:
    """A JSON value that `opsd.observe.status.jsonable` wrote, read back as the type `hint` names: a type with a
    `from_json` by it, another dataclass by its fields (those the document lacks keep their defaults), an enum by its
    value, a mapping's keys as their type (`"0"` as 0), lists as tuples, `"+Inf"` as infinity. `ValueError` or
    `TypeError` when the value is not of that type."""
    if value is None:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        for kind in (a for a in args if a is not type(None)):
            try:
                return parsed(kind, value)
            except (TypeError, ValueError, KeyError):
                continue
        raise ValueError(f"{value!r} is none of {hint}")
    if origin is tuple:
        items = list(_of(list, value))
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(parsed(args[0], v) for v in items)
        return tuple(parsed(a, v) for a, v in zip(args, items, strict=True))
    if origin in (Mapping, dict):
        key, item = args
        return frozen_mapping({_key(key, k): parsed(item, v) for k, v in _of(dict, value).items()})
    if isinstance(hint, type):
        return _typed(hint, value)
    raise TypeError(f"cannot read {hint} from a document")


def _typed(hint: type, value: Any) -> Any:
    if hasattr(hint, "from_json"):
        return hint.from_json(_of(dict, value))
    if dataclasses.is_dataclass(hint):
        return parsed_fields(hint, value)
    if issubclass(hint, Enum):
        return hint(value)
    if hint is float and not isinstance(value, bool):
        return float(_of((int, float), json_number(value)))
    if hint is int and not isinstance(value, bool):
        return _of(int, value)
    return _of(hint, value)


def parsed_fields(kind: type[T], doc: Mapping[str, Any], **given: Any) -> T:
    """A dataclass from the fields a document has (`given`: those its document leaves out, such as the key it is
    found under); the fields neither has keep their defaults."""
    hints = typing.get_type_hints(kind)
    return kind(**given, **{f.name: parsed(hints[f.name], doc[f.name]) for f in dataclasses.fields(kind)  # type: ignore[arg-type]
                            if f.init and f.name in _of(dict, doc) and f.name not in given})


def _key(hint: Any, key: str) -> Any:
    """A mapping's key, which JSON made a string."""
    return int(key) if hint is int else parsed(hint, key)


def _of(kind: type | tuple[type, ...], value: Any) -> Any:
    if not isinstance(value, kind):
        raise TypeError(f"{value!r} is not {kind}")
    return value
