"""Loading a config file: YAML in, a validated `OpsdConfig` out, or one error listing every problem at once.

Each problem names the file, the pipeline (by name, else by index) and the field, so a user fixes a config
in one round. A problem never shows a secret: an offending value under a secret-named key is masked, YAML errors
name the line and column without echoing it, and the whole message passes `opsd.telemetry.redaction.redact`.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from opsd.config.models import RENAMED_KEYS, OpsdConfig, duplicate_names
from opsd.telemetry.redaction import REDACTED, is_secret_key, redact


class ConfigError(ValueError):
    """An invalid config file; ``problems`` holds one line per invalid field."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path = path
        self.problems = [redact(p) for p in problems]
        problems = self.problems
        noun = "problem" if len(problems) == 1 else "problems"
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"invalid opsd config {path} ({len(problems)} {noun}):\n{lines}")


def load_config(path: str | Path) -> OpsdConfig:
    """Read and validate a YAML config; raises :class:`ConfigError` listing every problem."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(path, [f"cannot read: {error.strerror or error}"]) from error
    except UnicodeDecodeError as error:
        raise ConfigError(path, [f"not UTF-8 text: byte 0x{error.object[error.start]:02x} at offset {error.start} "
                                 f"(save the file as UTF-8)"]) from error
    except yaml.YAMLError as error:
        raise ConfigError(path, [f"not valid YAML: {_yaml_problem(error)}"]) from error
    if not isinstance(data, dict):
        raise ConfigError(path, ["the top level must be a mapping (cluster, spark, http, checks, pipelines)"])
    try:
        return OpsdConfig.model_validate(data)
    except ValidationError as error:
        problems = [_describe(e, data) for e in error.errors()]
        # The model checks unique names only once every pipeline is valid; report them now too.
        raw = data.get("pipelines")
        names = [p.get("name") for p in raw if isinstance(p, dict)] if isinstance(raw, list) else []
        duplicates = duplicate_names(names)
        if duplicates and not any(duplicates in p for p in problems):
            problems.append(f"pipelines: {duplicates}")
        raise ConfigError(path, problems) from error


def _describe(error: Any, data: dict[str, Any]) -> str:
    """``pipeline 'clicks' (pipelines[0]): sink.format: Input should be ...``"""
    loc = list(error["loc"])
    where = ""
    if len(loc) >= 2 and loc[0] == "pipelines" and isinstance(loc[1], int):
        index = loc[1]
        where = f"pipeline {_pipeline_name(data, index)}(pipelines[{index}]): "
        loc = loc[2:]
    field = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        renamed = RENAMED_KEYS.get(str(error["loc"][-1]))
        hint = f"renamed: {renamed}" if renamed else _known_keys(error["loc"])
        return f"{where}{field}: {message} ({hint})"
    if error["type"] not in ("missing", "value_error") and "input" in error:
        secret = any(is_secret_key(part) for part in error["loc"])
        message += f" (got {REDACTED if secret else repr(redact(error['input']))})"
    return f"{where}{field or '(top level)'}: {message}"


def _known_keys(loc: tuple[Any, ...]) -> str:
    """For a key no model has: the closest known key at that place ("did you mean 'host'?"), else all of them."""
    model: type[BaseModel] | None = OpsdConfig
    for part in loc[:-1]:
        if model is not None and isinstance(part, str):
            field = model.model_fields.get(part)
            model = _model_in(field.annotation) if field is not None else None
    keys = sorted(model.model_fields) if model is not None else []
    word = str(loc[-1])
    typos = 1 if len(word) <= 4 else 2
    close = sorted((d, k) for k in keys if (d := _edits(word, k)) <= typos)
    if close:
        return f"did you mean {close[0][1]!r}?"
    return f"known keys here: {', '.join(keys)}" if keys else "no keys are taken here"


def _edits(a: str, b: str) -> int:
    """Typing mistakes between two keys: letters inserted, deleted, replaced or swapped with a neighbour."""
    previous, row = None, list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + (x != y))
            if previous is not None and i > 1 and j > 1 and x == b[j - 2] and a[i - 2] == y:
                current[j] = min(current[j], previous[j - 2] + 1)
        previous, row = row, current
    return row[-1]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The config model a field holds, directly or in a list, dict or optional (`list[PipelineConfig]`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _yaml_problem(error: yaml.YAMLError) -> str:
    """What is wrong and where, without the excerpt of the file PyYAML quotes (the line may hold a secret)."""
    problem = getattr(error, "problem", None) or type(error).__name__
    mark = getattr(error, "problem_mark", None)
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else problem


def _pipeline_name(data: dict[str, Any], index: int) -> str:
    pipelines = data.get("pipelines")
    if isinstance(pipelines, list) and index < len(pipelines) and isinstance(pipelines[index], dict):
        name = pipelines[index].get("name")
        if isinstance(name, str) and name:
            return f"'{name}' "
    return ""


