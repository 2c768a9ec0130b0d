"""The config reference: every key of an `opsd run` config file with its default and description, read from the
models (`opsd.config.models`), so that `opsd run --help` and `docs/config-reference.md` can never disagree with
what the loader accepts.

`config_reference` is the outline `opsd run --help` prints; `config_reference_markdown` is the Markdown table (key,
type, default, description) written to `docs/config-reference.md` by `python -m opsd.config.reference` (a test
fails when the committed file is stale).
"""

from __future__ import annotations

import textwrap
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from opsd.config.models import OpsdConfig

#: Columns the reference is wrapped to.
WIDTH = 79
#: Where the Markdown reference is committed, relative to the repository root (the README and `--help` link it).
MARKDOWN_PATH = "docs/config-reference.md"


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


def config_reference_markdown(model: type[BaseModel] = OpsdConfig) -> str:
    """Every key as a row of one Markdown table: dotted key (`[]` marks a list item), type, default, description."""
    rows = [
        "# opsd config reference",
        "",
        "Every key of an `opsd run` config file (YAML). Generated from `opsd/config/models.py` by",
        "`python -m opsd.config.reference`; do not edit by hand. Unknown keys are errors.",
        "Examples: `examples/configs/`.",
        "",
        "| key | type | default | description |",
        "| --- | --- | --- | --- |",
    ]
    rows += [f"| `{key}` | {kind} | {default} | {_cell(description)} |"
             for key, kind, default, description in _rows(model, "")]
    return "\n".join(rows) + "\n"


def _rows(model: type[BaseModel], prefix: str) -> Iterator[tuple[str, str, str, str]]:
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        nested, suffix = _nested_model(field.annotation)
        description = field.description or ("" if nested is None else (nested.__doc__ or "").strip().splitlines()[0])
        default = (_default(field).removeprefix(" = ").strip() if nested is None or suffix else "") or "—"
        yield key, _cell(_type_name(field.annotation)), f"`{default}`" if default not in ("—", "(required)") \
            else default, description
        if nested is not None:
            yield from _rows(nested, f"{key}{suffix}.")


def _type_name(annotation: Any) -> str:
    """A reader's name for a field's type: `string`, `list of pipeline`, `one of: a, b`, `... or null`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(arg) for arg in args if arg is not type(None)]
        return " or ".join(names) + (" or null" if type(None) in args else "")
    if origin is typing.Literal:
        return "one of: " + ", ".join(str(arg) for arg in args)
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"map of {_type_name(args[0])} to {_type_name(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(annotation, str(annotation))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


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


def main() -> None:
    """Write the Markdown reference to `docs/config-reference.md` of the repository."""
    path = Path(__file__).resolve().parents[2] / MARKDOWN_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(config_reference_markdown())


if __name__ == "__main__":
    main()
