"""The ``opsd run CONFIG.yaml`` configuration: pydantic models, loading, and Spark defaults.

Loading reports every invalid field at once, each error naming the file, the pipeline (by name,
else by index) and the field, so a user fixes a config in one round. Unknown keys are errors too:
a typo in an option name must not silently fall back to a default.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    StringConstraints,
    ValidationError,
    model_validator,
)

from opsd.status import ProgressPolicy


def _conf_string(value: Any) -> Any:
    """Spark conf and data source options are strings; YAML gives bools and numbers too."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


ConfString = Annotated[str, BeforeValidator(_conf_string)]
# Used as the query name, a metric label and a path segment: keep it plain.
PipelineName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=128)]
CallableRef = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")]

_DURATION = re.compile(
    r"^\s*(?:interval\s+)?(\d+(?:\.\d+)?)\s*(milliseconds?|seconds?|minutes?|hours?)\s*$", re.IGNORECASE
)
_UNIT_SECONDS = {"millisecond": 0.001, "second": 1.0, "minute": 60.0, "hour": 3600.0}


def parse_duration_seconds(text: str) -> float:
    """A Spark processing-time interval such as ``"2 seconds"`` or ``"500 milliseconds"``."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration like '2 seconds', '500 milliseconds', '1 minute'")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2).lower().removesuffix("s")]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SparkSettings(_Model):
    """The Spark session opsd creates; ``conf`` overrides :func:`spark_defaults`."""

    master: str = "local[*]"
    app_name: str = "opsd"
    conf: dict[str, ConfString] = Field(default_factory=dict)


class HttpSettings(_Model):
    """Where ``/metrics``, ``/healthz``, ``/readyz`` and ``/status`` are served (port 0 = any free)."""

    host: str = "127.0.0.1"
    port: int = Field(default=9108, ge=0, le=65535)


class ChecksSettings(_Model):
    """Intervals of the periodic checks and the progress window of the watchdog and ``/readyz``."""

    watchdog_seconds: PositiveFloat = 10.0
    desync_seconds: PositiveFloat = 30.0
    oom_risk_seconds: PositiveFloat = 30.0
    autotune_seconds: PositiveFloat = 30.0
    tuning_seconds: PositiveFloat = 10.0
    stall_factor: PositiveFloat = 3.0
    min_progress_window_seconds: PositiveFloat = 60.0

    def progress_policy(self) -> ProgressPolicy:
        return ProgressPolicy(
            stall_factor=self.stall_factor, min_window_seconds=self.min_progress_window_seconds
        )


class SourceConfig(_Model):
    format: str = "yt"
    path: str | None = None
    options: dict[str, ConfString] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _yt_needs_path(self) -> SourceConfig:
        if self.format == "yt" and not self.path:
            raise ValueError("a 'yt' source needs 'path' (the queue, e.g. //home/project/queue)")
        return self


class TransformConfig(_Model):
    """Either SQL over a temporary view named ``source``, or a ``module:function(df) -> df``."""

    sql: str | None = None
    callable: CallableRef | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> TransformConfig:
        if (self.sql is None) == (self.callable is None):
            raise ValueError("set exactly one of 'sql' or 'callable'")
        return self


SinkFormat = Literal["yt", "console", "memory", "parquet", "foreachBatch"]


class SinkConfig(_Model):
    format: SinkFormat
    path: str | None = None
    options: dict[str, ConfString] = Field(default_factory=dict)
    callable: CallableRef | None = None

    @model_validator(mode="after")
    def _required_by_format(self) -> SinkConfig:
        if self.format in ("yt", "parquet") and not self.path:
            raise ValueError(f"a '{self.format}' sink needs 'path'")
        if self.format == "foreachBatch" and not self.callable:
            raise ValueError("a 'foreachBatch' sink needs 'callable' (module:function(df, batch_id))")
        if self.format != "foreachBatch" and self.callable:
            raise ValueError("'callable' applies only to the 'foreachBatch' sink")
        return self


class TriggerConfig(_Model):
    """At most one of the three; none means Spark's default (next batch as soon as possible)."""

    processing_time: str | None = None
    available_now: bool = False
    once: bool = False

    @model_validator(mode="after")
    def _at_most_one(self) -> TriggerConfig:
        chosen = [self.processing_time is not None, self.available_now, self.once]
        if sum(chosen) > 1:
            raise ValueError("set at most one of 'processing_time', 'available_now', 'once'")
        if self.processing_time is not None:
            parse_duration_seconds(self.processing_time)
        return self

    @property
    def interval_seconds(self) -> float | None:
        """The processing-time interval, for the watchdog; None for one-shot or default triggers."""
        return None if self.processing_time is None else parse_duration_seconds(self.processing_time)

    def spark_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``DataStreamWriter.trigger`` ({} keeps Spark's default)."""
        if self.processing_time is not None:
            return {"processingTime": self.processing_time}
        if self.available_now:
            return {"availableNow": True}
        if self.once:
            return {"once": True}
        return {}


class Bounds(_Model):
    min: PositiveInt
    max: PositiveInt

    @model_validator(mode="after")
    def _ordered(self) -> Bounds:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self


class TuningConfig(_Model):
    """Bounds within which the autotuner may move each live-tuning value (None = not tuned)."""

    max_rows_per_partition: Bounds | None = None
    dyn_batch_size: Bounds | None = None


class RestartPolicy(_Model):
    """Exponential backoff between restarts of a failed query; ``max_restarts`` None = forever."""

    initial_backoff_seconds: PositiveFloat = 1.0
    max_backoff_seconds: PositiveFloat = 300.0
    max_restarts: NonNegativeInt | None = None

    @model_validator(mode="after")
    def _ordered(self) -> RestartPolicy:
        if self.initial_backoff_seconds > self.max_backoff_seconds:
            raise ValueError("initial_backoff_seconds must not exceed max_backoff_seconds")
        return self


class PipelineConfig(_Model):
    """One streaming query. ``stateful`` tells opsd whether state must be retained across batches."""

    name: PipelineName
    source: SourceConfig
    transform: TransformConfig | None = None
    sink: SinkConfig
    output_mode: Literal["append", "update", "complete"] = "append"
    trigger: TriggerConfig = Field(default_factory=TriggerConfig)
    checkpoint_location: str | None = None
    stateful: bool = False
    tuning: TuningConfig = Field(default_factory=TuningConfig)
    restart: RestartPolicy = Field(default_factory=RestartPolicy)


class OpsdConfig(_Model):
    """The whole file. ``cluster`` None means the embedded cluster at its default root."""

    cluster: Annotated[str, StringConstraints(pattern=r"^(local|yt)://")] | None = None
    spark: SparkSettings = Field(default_factory=SparkSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    checks: ChecksSettings = Field(default_factory=ChecksSettings)
    pipelines: list[PipelineConfig] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> OpsdConfig:
        problem = _duplicate_names([p.name for p in self.pipelines])
        if problem:
            raise ValueError(problem)
        return self


def _duplicate_names(names: list[Any]) -> str | None:
    """Pipeline names are query names and metric labels, so they must be unique."""
    repeated = sorted({str(n) for n in names if n is not None and names.count(n) > 1})
    return f"pipeline names must be unique; repeated: {', '.join(repeated)}" if repeated else None


class ConfigError(ValueError):
    """An invalid config file; ``problems`` holds one line per invalid field."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        noun = "problem" if len(problems) == 1 else "problems"
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"invalid opsd config {path} ({len(problems)} {noun}):\n{lines}")


def load_config(path: str | Path) -> OpsdConfig:
    """Read and validate a YAML config; raises :class:`ConfigError` listing every problem."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as error:
        raise ConfigError(path, [f"cannot read: {error.strerror or error}"]) from error
    except yaml.YAMLError as error:
        raise ConfigError(path, [f"not valid YAML: {error}"]) from error
    if not isinstance(data, dict):
        raise ConfigError(path, ["the top level must be a mapping (cluster, spark, http, checks, pipelines)"])
    try:
        return OpsdConfig.model_validate(data)
    except ValidationError as error:
        problems = [_describe(e, data) for e in error.errors()]
        # The model checks unique names only once every pipeline is valid; report them now too.
        raw = data.get("pipelines")
        names = [p.get("name") for p in raw if isinstance(p, dict)] if isinstance(raw, list) else []
        duplicates = _duplicate_names(names)
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
    if error["type"] not in ("missing", "value_error") and "input" in error:
        message += f" (got {error['input']!r})"
    return f"{where}{field or '(top level)'}: {message}"


def _pipeline_name(data: dict[str, Any], index: int) -> str:
    pipelines = data.get("pipelines")
    if isinstance(pipelines, list) and index < len(pipelines) and isinstance(pipelines[index], dict):
        name = pipelines[index].get("name")
        if isinstance(name, str) and name:
            return f"'{name}' "
    return ""


def spark_defaults(config: OpsdConfig) -> dict[str, str]:
    """The seeds' best practices for streaming, overridden by the user's ``spark.conf``.

    Stateless pipelines need only the last couple of batches' metadata, so retaining 2 (instead of
    100) keeps checkpoints small; batch AQE re-plans every micro-batch and is turned off in favour
    of streaming adaptive execution; a graceful stop lets the running batch finish on SIGTERM.
    """
    defaults = {
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.streaming.adaptiveExecution.enabled": "true",
        "spark.streaming.stopGracefullyOnShutdown": "true",
    }
    if not any(p.stateful for p in config.pipelines):
        defaults["spark.sql.streaming.minBatchesToRetain"] = "2"
    return {**defaults, **config.spark.conf}
