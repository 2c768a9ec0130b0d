"""The Markdown config reference (`docs/config-reference.md`): generated from the config models, committed up to
date, one row per key with its type, default and description, and linked from the README."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel

from opsd.config.models import OpsdConfig, PipelineConfig
from opsd.config.reference import MARKDOWN_PATH, config_reference_markdown

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / MARKDOWN_PATH


def rows() -> dict[str, list[str]]:
    """The table's rows by key: [type, default, description]."""
    found = {}
    for line in COMMITTED.read_text().splitlines():
        if match := re.match(r"^\| `([^`]+)` \| (.*) \|$", line):
            found[match.group(1)] = [cell.strip() for cell in re.split(r"(?<!\\)\|", match.group(2))]
    return found


def dotted_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    keys = []
    for name, field in model.model_fields.items():
        keys.append(f"{prefix}{name}")
        annotation = field.annotation
        candidates = (annotation, *getattr(annotation, "__args__", ()))
        nested = [a for a in candidates if isinstance(a, type) and issubclass(a, BaseModel)]
        if nested:
            suffix = "[]" if getattr(annotation, "__origin__", None) is list else ""
            keys += dotted_keys(nested[0], f"{prefix}{name}{suffix}.")
    return keys


def test_the_committed_reference_equals_a_fresh_build():
    assert COMMITTED.read_text() == config_reference_markdown(), "stale: run python -m opsd.config.reference"


def test_every_key_of_the_models_has_a_row_with_a_type_and_a_description():
    table = rows()
    assert list(table) == dotted_keys(OpsdConfig)
    assert [key for key, (kind, _, description) in table.items() if not kind or not description] == []


def test_a_row_shows_the_type_the_default_and_the_description_of_its_field():
    table = rows()
    assert table["http.port"] == ["integer", "`9108`", "port to bind; 0 = any free port"]
    assert table["pipelines[].output_mode"][:2] == ["one of: append, update, complete", "`append`"]
    assert table["pipelines[].name"][1] == "(required)"
    assert table["pipelines[].restart.max_restarts"][0] == "integer or null"
    assert PipelineConfig.model_fields["stateful"].description in table["pipelines[].stateful"][2]


def test_the_readme_links_the_reference_and_the_examples():
    readme = (ROOT / "README.md").read_text()
    assert f"]({MARKDOWN_PATH})" in readme and "](examples/)" in readme
