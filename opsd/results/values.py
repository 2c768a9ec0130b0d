"""Immutable values inside the frozen results: read-only mappings (`frozen_mapping`), JSON values frozen all the way
down (`frozen_json`: objects as read-only mappings, arrays as tuples) and the type of such a value (`JsonValue`), for
the parts of a result that are JSON by nature (what a decision was made from, a history entry's values, the Queue
Agent's attributes), and the words of enums read back from documents. A result is frozen; a dict inside it could
still change under a reader on another thread."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from types import MappingProxyType
from typing import TypeAlias, TypeVar

#: A JSON value: a scalar, an array (a tuple once frozen) or an object with string keys.
JsonValue: TypeAlias = str | int | float | bool | Sequence["JsonValue"] | Mapping[str, "JsonValue"] | None

K = TypeVar("K")
V = TypeVar("V")


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
