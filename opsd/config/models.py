"""The config's models: every key of an `opsd run` config file, with its type, default and description.

Unknown keys are errors (a typo must not silently fall back to a default), and a key is accepted only when
something in opsd reads it. Loading and its error messages: `opsd.config.load`.
"""

from __future__ import annotations

import os
import posixpath
import re
from typing import Annotated, Any, Literal, TextIO

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    StringConstraints,
    model_validator,
)

from opsd.config.durations import parse_duration_seconds, spark_interval
from opsd.config.thresholds import OOM_CONFIDENCE, OOM_HALF_LIFE_BATCHES, OOM_RISK_TARGET
from opsd.observe.readiness import ProgressPolicy
from opsd.results.positions import consumer_key
from opsd.telemetry.logs import THIRD_PARTY_LEVELS, renders_json
from opsd.telemetry.redaction import is_secret_key, secret_in_value
from streaming_core.cluster import InvalidUriError, resolve_uri
from streaming_core.cluster.base import MAX_ROWS_PER_TABLET_TRANSACTION
from streaming_core.options import CHECKPOINT_LOCATION, CONSUMER_PATH, PATH, QUERY_NAME, TUNING_PATH
from streaming_core.tuning import default_tuning_path


def _conf_string(value: Any) -> Any:
    """Spark conf and data source options are strings; YAML gives bools and numbers too."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


ConfString = Annotated[str, BeforeValidator(_conf_string)]

#: Keys that name a secret but hold a reference to one, never the secret: a file (`spark.authenticate.secret.file`,
#: `...oauthTokenFile`) or a Kubernetes Secret (`spark.kubernetes.executor.secretKeyRef.YT_TOKEN`).
SECRET_REFERENCE = re.compile(r"(\.file|File)$|^spark\.kubernetes\.(driver|executor)\.(secretKeyRef|secrets)\.")
#: What a refused secret key is told to do instead.
SECRET_ADVICE = ("a config file is stored in plain text (the chart's ConfigMap) and Spark conf reaches the JVM's "
                 "command line and the Spark UI: give the YTsaurus token as the YT_TOKEN environment variable "
                 "(the chart's ytToken.existingSecret), other secrets as files (*.file keys) or Kubernetes Secrets")


def _no_secrets(settings: dict[str, str]) -> dict[str, str]:
    """Refuses keys that name a secret (`SECRET_KEY` of `opsd.telemetry.redaction`) unless they only refer to one,
    and values that hold one (`secret_in_value`: `token=` inside `YT_CONFIG_PATCHES`, a token-shaped value), naming
    the key and what it holds, never the value."""
    refused = sorted(k for k in settings if is_secret_key(k) and not SECRET_REFERENCE.search(k))
    if refused:
        raise ValueError(f"{', '.join(map(repr, refused))} would hold a secret; {SECRET_ADVICE}")
    held = {k: found for k, v in sorted(settings.items())
            if (found := secret_in_value(v, settings=not SECRET_REFERENCE.search(k)))}
    if held:
        named = ", ".join(f"{k!r} ({found} in its value)" for k, found in held.items())
        raise ValueError(f"{named} would hold a secret; {SECRET_ADVICE}")
    return settings


#: Spark conf or data source options: strings, none of them a secret.
def _cluster_uri(uri: str) -> str:
    """A cluster URI as `streaming_core.cluster` takes it (the one place its forms are defined)."""
    try:
        resolve_uri(uri)
    except InvalidUriError as e:
        raise ValueError(str(e).removeprefix(f"cluster URI {uri!r}: ")) from None
    return uri


ConfSettings = Annotated[dict[str, ConfString], AfterValidator(_no_secrets)]
# Used as the query name, a metric label and a path segment: keep it plain.
PipelineName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=128)]
CallableRef = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")]

class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


#: The seeds' key for the graceful-shutdown timeout (milliseconds, or a duration); opsd honours it on SIGTERM.
GRACEFUL_TIMEOUT_KEY = "spark.streaming.stopGracefullyOnShutdown.timeout"
DEFAULT_GRACEFUL_TIMEOUT_SECONDS = 30.0


class SparkSettings(_Model):
    """The Spark session opsd creates; `conf` overrides `opsd.config.spark.spark_defaults`."""

    master: str = Field("local[*]", description="Spark master URL (local[N], local-cluster[...], k8s://...)")
    app_name: str = Field("opsd", description="Spark application name")
    ui_port: int = Field(
        4040, ge=0, le=65535,
        description="port of the Spark UI and its REST API (executor memory peaks for the OOM check); 0 = any free")
    ui_host: str | None = Field(
        None, description="the address the Spark UI binds (Spark takes it from $SPARK_LOCAL_IP): null = "
                          "$SPARK_LOCAL_IP if set, else 127.0.0.1 with a local master (this host only) and Spark's "
                          "default (every interface) with another; 0.0.0.0 = every interface (the chart's choice, "
                          "behind its NetworkPolicy)")
    conf: ConfSettings = Field(
        default_factory=dict,
        description=f"Spark conf, over opsd's defaults; no secrets (keys naming a token, password, secret..., "
                    f"token-shaped values and token= settings inside values are refused); {GRACEFUL_TIMEOUT_KEY} "
                    "(milliseconds or a duration such as '30s') bounds how long a "
                    "SIGTERM waits for the running micro-batch")

    @model_validator(mode="after")
    def _graceful_timeout_is_a_duration(self) -> SparkSettings:
        self.graceful_timeout_seconds()
        return self

    def graceful_timeout_seconds(self) -> float:
        """How long opsd lets the running micro-batch finish on SIGTERM before it stops the query."""
        value = self.conf.get(GRACEFUL_TIMEOUT_KEY)
        if value is None:
            return DEFAULT_GRACEFUL_TIMEOUT_SECONDS
        try:
            return parse_duration_seconds(value, bare_unit="ms")
        except ValueError as e:
            raise ValueError(f"conf.{GRACEFUL_TIMEOUT_KEY}: {e}") from None


#: opsd's HTTP port unless configured: the config default, the CLI's, the image's and the chart's (checked by tests).
DEFAULT_PORT = 9108


class HttpSettings(_Model):
    """Where `/metrics`, `/healthz`, `/readyz` and `/status` are served."""

    host: str = Field("127.0.0.1", description="address to bind (0.0.0.0 in a container)")
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535, description="port to bind; 0 = any free port")
    bearer_token_file: str | None = Field(
        None, description="a file (a mounted Secret) holding the bearer token that /metrics and /status then ask for "
                          "(Authorization: Bearer <token>; read at every request, so a rotation applies at once); "
                          "/healthz and /readyz stay open; null = no token")
    status_row_values: bool = Field(
        False, description="show the row values that Spark's failure texts quote (a string that did not cast, a "
                           "Row(...)) in /status; false = each is replaced by <row value>: other people's data stays "
                           "out")


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


PythonLevel = Annotated[Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], BeforeValidator(_upper)]
SparkLevel = Annotated[Literal["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"], BeforeValidator(_upper)]


class LoggingSettings(_Model):
    """opsd's log stream on stderr: opsd's own events, third-party Python loggers and Spark's JVM, one format."""

    level: PythonLevel = Field("INFO", description="opsd's level: INFO has one line per micro-batch and state change")
    format: Literal["auto", "json", "console"] = Field(
        "auto", description="json: one JSON object per line; console: for people; auto: console on a terminal, "
                            "else json")
    spark_level: SparkLevel = Field("WARN", description="level of Spark's JVM (log4j2) loggers")
    levels: dict[str, PythonLevel] = Field(
        default_factory=dict, description="levels of Python loggers by name, e.g. {apscheduler: INFO}, over opsd's "
                                          f"defaults ({', '.join(f'{k}: {v}' for k, v in THIRD_PARTY_LEVELS.items())})")

    def json_lines(self, stream: TextIO) -> bool:
        """Whether lines written to `stream` are JSON."""
        return self.format == "json" or (self.format == "auto" and renders_json(stream))


class ChecksSettings(_Model):
    """Intervals of the periodic checks, and the progress window of the watchdog and `/readyz`."""

    watchdog_seconds: PositiveFloat = Field(10.0, description="how often the stalled-query watchdog runs")
    tuning_seconds: PositiveFloat = Field(10.0, description="how often the tuning values in force are read")
    phases_seconds: PositiveFloat = Field(
        5.0, description="how often each pipeline's batch phases are read (where its batches' time goes; the "
                         "cluster keeps the last 16 batches' parts)")
    producers_seconds: PositiveFloat = Field(
        15.0, description="how often the queue producers of pipelines in producer mode are read (sessions, epoch "
                          "bumps, rows skipped as written before, zombie attempts fenced off)")
    stall_factor: PositiveFloat = Field(
        3.0, description="a query is silent (watchdog, /readyz) after stall_factor x its trigger interval ...")
    min_progress_window_seconds: PositiveFloat = Field(
        60.0, description="... or after this many seconds, whichever is longer")
    desync_seconds: PositiveFloat = Field(
        15.0, description="how often checkpoints, consumers and queues are compared (offset desync)")
    lag_seconds: PositiveFloat = Field(
        15.0, description="how often backlog, lag in seconds and time to drain are measured")
    lag_window_seconds: PositiveFloat = Field(
        300.0, description="rates behind time to drain are averaged over this window")
    lag_history_seconds: PositiveFloat = Field(
        3600.0, description="how far back the sampled offset-to-time history reaches (lag of queues without "
                            "$timestamp); older unread rows show at least this lag")
    retention_seconds: PositiveFloat = Field(
        15.0, description="how often the trim forecast (time until the queue's @auto_trim_config trims unread rows) "
                          "and the vital-consumer audit run; rates are averaged over lag_window_seconds")
    autotune_seconds: PositiveFloat = Field(
        10.0, description="how often the auto-tuner decides (it also decides before every start of a pipeline)")
    heal: bool = Field(
        True, description="heal the offset desync of the pipelines opsd runs (advance the consumer to the "
                          "committed batch's end while the query is idle or stopped)")
    history_path: str | None = Field(
        None, pattern=r"^//", description="the cluster table (sorted dynamic) that keeps every query's tuner, heal "
                                          "and replan decisions; null = one per query, next to its tuning document "
                                          "(<tuning document>_history)")
    history_rows_per_query: PositiveInt = Field(
        500, description="decisions kept per query in the history table; the oldest are deleted beyond it")
    oom_risk_seconds: PositiveFloat = Field(
        10.0, description="how often the OOM risk of each query's next batch is judged")
    oom_risk_target: float = Field(
        OOM_RISK_TARGET, gt=0, le=1,
        description="the OOM risk (the predicted peak's upper bound / the pool's limit) that the safe "
                    "max_rows_per_partition keeps every memory pool under; above it opsd warns")
    oom_half_life_batches: PositiveFloat = Field(
        OOM_HALF_LIFE_BATCHES, description="OOM model: a batch this many batches old weighs half as much as the newest")
    oom_confidence: float = Field(
        OOM_CONFIDENCE, ge=0.5, lt=1,
        description="OOM model: the one-sided confidence of the peak's upper bound that the OOM risk is judged by "
                    "(noisy or few observations widen the bound)")

    def progress_policy(self) -> ProgressPolicy:
        return ProgressPolicy(stall_factor=self.stall_factor, min_window_seconds=self.min_progress_window_seconds)


class SourceConfig(_Model):
    """Where a pipeline reads: a `yt` queue through its consumer, or any Spark streaming source."""

    format: str = Field("yt", description="Spark source format")
    path: str | None = Field(None, description="the queue (required for yt), e.g. //home/project/queue")
    options: ConfSettings = Field(
        default_factory=dict, description="source options (yt: consumer_path, max_rows_per_partition, ...)")

    @model_validator(mode="after")
    def _yt_needs_path_and_consumer(self) -> SourceConfig:
        if self.format == "yt" and not self.path:
            raise ValueError("a 'yt' source needs 'path' (the queue, e.g. //home/project/queue)")
        if self.format == "yt" and not self.options.get(CONSUMER_PATH):
            raise ValueError(f"a 'yt' source needs options.{CONSUMER_PATH} (the consumer whose offsets the query "
                             f"reads and acknowledges, e.g. //home/project/consumer)")
        return self


class TransformConfig(_Model):
    """Either SQL over a temporary view named `source`, or a `module:function(df) -> df`."""

    sql: str | None = Field(None, description="SELECT ... FROM source")
    callable: CallableRef | None = Field(None, description="package.module:function taking and returning a DataFrame")

    @model_validator(mode="after")
    def _exactly_one(self) -> TransformConfig:
        if (self.sql is None) == (self.callable is None):
            raise ValueError("set exactly one of 'sql' or 'callable'")
        return self


SinkFormat = Literal["yt", "console", "memory", "parquet", "foreachBatch"]


class SinkConfig(_Model):
    """Where a pipeline writes."""

    format: SinkFormat = Field(description="Spark sink format, or foreachBatch with 'callable'")
    path: str | None = Field(None, description="the target (required for yt and parquet)")
    options: ConfSettings = Field(
        default_factory=dict, description="sink options (yt: dyn_batch_size, transactional, ...)")
    callable: CallableRef | None = Field(None, description="foreachBatch only: package.module:function(df, batch_id)")

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

    processing_time: str | None = Field(None, description="a micro-batch every this long, e.g. '10s', '1 minute'")
    available_now: bool = Field(False, description="read what is there now, in batches, then stop")
    once: bool = Field(False, description="one batch, then stop")

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
        """Keyword arguments for `DataStreamWriter.trigger` ({} keeps Spark's default)."""
        if self.interval_seconds is not None:
            return {"processingTime": spark_interval(self.interval_seconds)}
        if self.available_now:
            return {"availableNow": True}
        if self.once:
            return {"once": True}
        return {}


class RestartPolicy(_Model):
    """Exponential backoff between restarts of a failed query."""

    initial_backoff_seconds: PositiveFloat = Field(1.0, description="delay before the first restart")
    max_backoff_seconds: PositiveFloat = Field(300.0, description="the delay doubles up to this cap")
    max_restarts: NonNegativeInt | None = Field(None, description="give up after this many; null = never")

    @model_validator(mode="after")
    def _ordered(self) -> RestartPolicy:
        if self.initial_backoff_seconds > self.max_backoff_seconds:
            raise ValueError("initial_backoff_seconds must not exceed max_backoff_seconds")
        return self


#: Keys an earlier release took, and what replaced them: named in the error a config using one gets.
RENAMED_KEYS = {
    "dyn_batch_size_step": "dyn_batch_size_step_up, a factor (1.5 by default) where this was rows added per step",
}


class AutotuneSettings(_Model):
    """The auto-tuner of one query's row and byte caps and `dyn_batch_size` (`opsd.checks.autotune`)."""

    mode: Literal["off", "recommend", "apply"] | None = Field(
        None, description="off; recommend: metrics and logs only; apply: write the tuning document; null = apply "
                          "for pipelines opsd runs, recommend for watched queries")
    target_share: float = Field(
        0.7, gt=0, le=1, description="a batch should last at most this share of the trigger interval")
    target_batch_seconds: PositiveFloat = Field(
        10.0, description="the batch duration aimed at when the query has no processing-time trigger")
    risk_threshold: float = Field(
        OOM_RISK_TARGET, gt=0, le=1, description="OOM risk at or above which the cap is cut at once and never raised")
    min_rows_per_partition: PositiveInt = Field(1000, description="lower bound of max_rows_per_partition")
    max_rows_per_partition: PositiveInt = Field(10_000_000, description="upper bound of max_rows_per_partition")
    start_rows_per_partition: PositiveInt = Field(
        100_000, description="the cap set before a query starts uncapped (its first batch must not swallow the "
                             "backlog), when the OOM model gives no safe cap")
    max_step_up: float = Field(2.0, gt=1, description="a raise multiplies the cap by at most this")
    max_step_up_unknown_risk: float = Field(
        1.25, gt=1, description="... and by at most this while the OOM risk is unknown")
    max_step_down: float = Field(0.5, gt=0, lt=1, description="a cut for slow batches keeps at least this share")
    memory_cut: float = Field(
        0.5, gt=0, lt=1, description="on OOM risk over the threshold or a batch failed of memory, the cap becomes "
                                     "this share of the largest batch's rows per partition (or of the cap)")
    hysteresis: float = Field(
        0.15, ge=0, lt=1, description="no change unless the new value differs by more than this share")
    stabilisation_batches: PositiveInt = Field(
        2, description="batches planned after a change that must complete before the next change of the knob")
    history_batches: PositiveInt = Field(
        10, description="recent batches fitted for the batch-duration-versus-size relation")
    byte_cap: bool = Field(
        True, description="guard memory with max_bytes_per_partition, set to the OOM check's safe byte cap (it holds "
                          "whatever the rows' width); max_rows_per_partition then follows the batch duration only")
    min_bytes_per_partition: PositiveInt = Field(
        1 << 20, description="lower bound of max_bytes_per_partition (bytes of YTsaurus data weight)")
    max_bytes_per_partition: PositiveInt = Field(
        1 << 30, description="upper bound of max_bytes_per_partition (bytes of YTsaurus data weight)")
    min_dyn_batch_size: PositiveInt = Field(1000, description="lower bound of dyn_batch_size")
    max_dyn_batch_size: PositiveInt = Field(
        MAX_ROWS_PER_TABLET_TRANSACTION,
        description="upper bound of dyn_batch_size (never above the rows-per-transaction limit)")
    dyn_batch_size_step_up: float = Field(
        1.5, gt=1, description="the search for dyn_batch_size tries this many times larger (or smaller) calls than the "
                               "best size measured, then halves the gap to a slower one")
    slow_call_seconds: PositiveFloat = Field(
        5.0, description="an insert call slower than this halves dyn_batch_size (as do retries and errors)")

    @model_validator(mode="after")
    def _ordered_bounds(self) -> AutotuneSettings:
        if self.min_rows_per_partition > self.max_rows_per_partition:
            raise ValueError("min_rows_per_partition must not exceed max_rows_per_partition")
        if self.min_bytes_per_partition > self.max_bytes_per_partition:
            raise ValueError("min_bytes_per_partition must not exceed max_bytes_per_partition")
        if self.min_dyn_batch_size > self.max_dyn_batch_size:
            raise ValueError("min_dyn_batch_size must not exceed max_dyn_batch_size")
        return self

    def mode_for(self, watched: bool) -> str:
        """The mode in force: the configured one, else `recommend` for watched queries and `apply` for the others."""
        return self.mode or ("recommend" if watched else "apply")


class PipelineConfig(_Model):
    """One streaming query: source -> optional transform -> sink."""

    name: PipelineName = Field(description="query name, metric label and path segment: [A-Za-z0-9_.-]")
    source: SourceConfig
    transform: TransformConfig | None = None
    sink: SinkConfig
    output_mode: Literal["append", "update", "complete"] = Field("append", description="Spark output mode")
    trigger: TriggerConfig = Field(default_factory=TriggerConfig)
    checkpoint_location: str | None = Field(None, description="local path, file:// or yt:///...")
    stateful: bool = Field(
        False, description="the query keeps state across batches (opsd then keeps Spark's default batch history)")
    restart: RestartPolicy = Field(default_factory=RestartPolicy)
    autotune: AutotuneSettings = Field(default_factory=AutotuneSettings)

    def source_tuning_path(self) -> str | None:
        """The live tuning document the `yt` source reads (`max_rows_per_partition`)."""
        if self.source.format != "yt":
            return None
        options = self.source.options
        return options.get(TUNING_PATH) or default_tuning_path(options.get(CONSUMER_PATH))

    def sink_tuning_path(self) -> str | None:
        """The live tuning document the `yt` sink reads (`dyn_batch_size`): its own, else the source's."""
        if self.sink.format != "yt":
            return None
        return self.sink.options.get(TUNING_PATH) or self.source_tuning_path()


    def yt_sink_options(self) -> dict[str, str]:
        """The `yt` sink's options as Spark hands them to it in `opsd run`: the configured ones, the path, the tuning
        document opsd gives it, the checkpoint location and the query's name (producer mode names its sessions by
        them)."""
        options = {k: str(v) for k, v in self.sink.options.items()}
        options.setdefault(TUNING_PATH, self.sink_tuning_path() or "")
        return {**options, PATH: self.sink.path or "", QUERY_NAME: self.name,
                CHECKPOINT_LOCATION: self.checkpoint_location or ""}


def unnamed_for_heal(target: Any) -> list[str]:
    """What a heal of `target` (a watch entry, a query target) lacks of the two it must name, `queue` and
    `consumer`: a heal moves what the config names, never what a checkpoint's offsets name."""
    return [key for key in ("queue", "consumer") if not getattr(target, key)]


class WatchConfig(_Model):
    """A query opsd does not run (a job run elsewhere, SPYT's JVM connector too) whose desync and lag it watches."""

    name: PipelineName = Field(description="the query's name in metrics, /status and `opsd desync heal NAME`")
    checkpoint_location: str = Field(description="its checkpointLocation: local path, file:// or yt:///...")
    queue: str | None = Field(None, description="the queue it reads; null = every yt source of the checkpoint")
    consumer: str | None = Field(
        None, description="its consumer; null = the consumer_path in the checkpoint's offsets (SPYT's have none)")
    heal: bool = Field(False, description="heal its offset desync automatically (off: opsd does not know when "
                                          "the job runs; `opsd desync heal` heals on demand); needs `queue` and "
                                          "`consumer`")
    autotune: AutotuneSettings = Field(default_factory=AutotuneSettings)

    @model_validator(mode="after")
    def _heals_only_a_named_consumer(self) -> WatchConfig:
        missing = unnamed_for_heal(self)
        if self.heal and missing:
            raise ValueError(f"watch {self.name!r}: heal: true needs {' and '.join(map(repr, missing))} (what a heal "
                             "moves comes from the config, never from a checkpoint's offsets)")
        return self


def _cypress_folder(path: str) -> str:
    """A Cypress folder given as an absolute path (`//name/...`), without a trailing `/`."""
    if not path.startswith("//") or path.rstrip("/") == "/" or any(c in path for c in "@&*[]{}\\"):
        raise ValueError(f"{path!r}: expected a Cypress folder such as //tmp/opsd-claims (no @ & * [ ] {{ }} \\)")
    return path.rstrip("/")


class OpsdConfig(_Model):
    """The whole file."""

    cluster: Annotated[str, AfterValidator(_cluster_uri)] | None = Field(
        None, description="local:///root (embedded), yt://proxy, yt+https://proxy:443 (?ca_bundle=/path.pem); "
                          "null = $OPSD_CLUSTER, $YT_PROXY or .opsd/cluster")
    spark: SparkSettings = Field(default_factory=SparkSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    checks: ChecksSettings = Field(default_factory=ChecksSettings)
    logging: LoggingSettings = Field(default_factory=LoggingSettings)
    pipelines: list[PipelineConfig] = Field(min_length=1, description="the queries to run")
    watch: list[WatchConfig] = Field(
        default_factory=list, description="queries run elsewhere whose checkpoints opsd watches (desync, lag)")
    claims_root: Annotated[str, AfterValidator(_cypress_folder)] = Field(
        "//tmp/opsd-claims", description="on YTsaurus, the Cypress folder of the consumers' claim nodes, locked by "
                                         "each pipeline while opsd runs (every opsd of a cluster names the same one; "
                                         "needs write permission)")

    @model_validator(mode="after")
    def _unique_names(self) -> OpsdConfig:
        problem = duplicate_names([p.name for p in self.pipelines] + [w.name for w in self.watch])
        if problem:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _own_data_only(self) -> OpsdConfig:
        owners = [(p.name, p.source.options.get(CONSUMER_PATH) if p.source.format == "yt" else None,
                   p.checkpoint_location) for p in self.pipelines]
        owners += [(w.name, w.consumer, w.checkpoint_location) for w in self.watch]
        problems = [*shared("consumer", {n: consumer_key(c) for n, c, _ in owners if c}),
                    *shared("checkpoint location", {n: checkpoint_key(cp) for n, _, cp in owners if cp})]
        if problems:
            raise ValueError("; ".join(problems))
        return self


def checkpoint_key(location: str) -> str:
    """A checkpoint location as compared between queries: `file:///x`, `/x/` and `/x/./` are one; `yt:///x` keeps
    its scheme; a relative path is taken from the working directory (as Spark takes it)."""
    scheme, sep, rest = location.partition("://")
    if not sep:
        return os.path.abspath(location)
    if scheme == "file":
        return os.path.abspath(rest)
    return f"{scheme}://{posixpath.normpath(rest or '/')}"


def shared(kind: str, keys: dict[str, str]) -> list[str]:
    """One problem per `kind` two or more queries share, naming them all: one query would move the other's data
    (a consumer acknowledged by one is skipped by the other; a checkpoint is one query's)."""
    by_key: dict[str, list[str]] = {}
    for name, key in keys.items():
        by_key.setdefault(key, []).append(name)
    return [f"{' and '.join(names)} share the {kind} {key}: each query needs its own (one would move or skip the "
            f"other's rows)" for key, names in by_key.items() if len(names) > 1]


def duplicate_names(names: list[Any]) -> str | None:
    """Pipeline names are query names and metric labels, so they must be unique."""
    repeated = sorted({str(n) for n in names if n is not None and names.count(n) > 1})
    return f"pipeline names must be unique; repeated: {', '.join(repeated)}" if repeated else None
