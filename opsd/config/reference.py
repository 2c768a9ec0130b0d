"""The config reference: every key of an `opsd run` config file with its default and description, read from the
models (`opsd.config.models`), so that `opsd run --help` can never disagree with what the loader accepts."""

from __future__ import annotations

import textwrap
import types
import typing
from collections.abc import Iterator

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from opsd.config.models import OpsdConfig

#: Columns the reference is wrapped to.
WIDTH = 79


def config_reference(model: type[BaseModel] = OpsdConfig, width: int = WIDTH) -> str:
    """The keys as an indented outline (like the YAML itself): per section its plain keys, then its sections."""
    return "\n".join(_lines(model, 0, width))


def _lines(model: type[BaseModel], depth: int, width: int) -> Iterator[str]:
    indent = "  " * depth
    sections = []
    for name, field in model.model_fields.items():
        nested, suffix = _nested_model(field.annotation)
        if nested is None:
            yield from textwrap.wrap(f"{name}{_default(field)}: {field.description or ''}", width,
                                     initial_indent=indent, subsequent_indent=indent + "    ")
        else:
            sections.append((f"{name}{suffix}", field, nested))
    for key, field, nested in sections:
        summary = (field.description or (nested.__doc__ or "").strip().splitlines()[0]).rstrip(".")
        yield from textwrap.wrap(f"{key}: {summary}", width, initial_indent=indent,
                                 subsequent_indent=indent + "    ")
        yield from _lines(nested, depth + 1, width)


def _nested_model(annotation: object) -> tuple[type[BaseModel] | None, str]:
    """The model inside `Model`, `Model | None` or `list[Model]`, and the key suffix (`[]` for lists)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, ""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list and args:
        model, _ = _nested_model(args[0])
        return model, "[]"
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            model, suffix = _nested_model(arg)
            if model is not None:
                return model, suffix
    return None, ""


def _default(field: FieldInfo) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return " (required)"
    value = field.get_default(call_default_factory=True)
    if value is None or value == {} or value == []:
        return ""
    if isinstance(value, bool):
        value = str(value).lower()
    return f" = {value}"
