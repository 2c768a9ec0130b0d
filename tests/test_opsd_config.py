"""`opsd run CONFIG.yaml`: validation that reports every problem at once, and the Spark defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from opsd.config.durations import parse_duration_seconds
from opsd.config.load import ConfigError, load_config
from opsd.config.models import AutotuneSettings, OpsdConfig
from opsd.config.spark import JAVA_OPTIONS, LOCAL_IP_ENV, spark_defaults, spark_environment
from opsd.telemetry.logs import LOG4J2_CONFIG

VALID = """
cluster: local:///tmp/opsd-cluster
spark:
  master: local[2]
  conf:
    spark.sql.shuffle.partitions: 4
    spark.sql.adaptive.enabled: true
http: {host: 0.0.0.0, port: 9108}
checks: {watchdog_seconds: 5, stall_factor: 4}
pipelines:
  - name: data_length
    source:
      path: //home/demo/queue
      options: {consumer_path: //home/demo/consumer, max_rows_per_partition: 1000}
    transform: {sql: "SELECT data, length(data) AS len FROM source"}
    sink: {format: yt, path: //home/demo/output}
    trigger: {processing_time: 2 seconds}
    checkpoint_location: yt:///home/demo/checkpoints/data_length
    restart: {initial_backoff_seconds: 1, max_backoff_seconds: 60, max_restarts: 10}
  - name: counts
    source: {format: rate, options: {rowsPerSecond: 10}}
    transform: {callable: "my_jobs.transforms:count_by_minute"}
    sink: {format: foreachBatch, callable: "my_jobs.sinks:write"}
    output_mode: update
    trigger: {available_now: true}
    stateful: true
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "opsd.yaml"
    path.write_text(text)
    return path


def problems_of(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    assert str(tmp_path / "opsd.yaml") in str(caught.value)
    return caught.value.problems


def test_valid_config_loads_with_typed_values(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, VALID))

    first, second = config.pipelines
    assert config.cluster == "local:///tmp/opsd-cluster"
    assert config.spark.conf["spark.sql.shuffle.partitions"] == "4"
    assert first.source.format == "yt" and first.source.options["max_rows_per_partition"] == "1000"
    assert first.trigger.interval_seconds == 2.0
    assert first.trigger.spark_kwargs() == {"processingTime": "2000 milliseconds"}
    assert second.trigger.spark_kwargs() == {"availableNow": True}
    assert second.trigger.interval_seconds is None
    assert config.checks.progress_policy().stall_factor == 4


def test_minimal_config_gets_defaults() -> None:
    config = OpsdConfig.model_validate(
        {"pipelines": [{"name": "p", "source": {"path": "//q", "options": {"consumer_path": "//c"}},
                        "sink": {"format": "console"}}]}
    )

    assert config.cluster is None
    assert config.spark.master == "local[*]"
    assert (config.http.host, config.http.port) == ("127.0.0.1", 9108)
    pipeline = config.pipelines[0]
    assert (pipeline.output_mode, pipeline.stateful, pipeline.transform) == ("append", False, None)
    assert pipeline.trigger.spark_kwargs() == {}
    assert pipeline.restart.max_restarts is None


def test_every_invalid_field_is_reported_at_once_with_pipeline_and_field(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        """
cluster: http://nope
http: {port: 70000, hots: x}
pipelines:
  - name: clicks
    source: {}
    sink: {format: kafka}
    trigger: {processing_time: 2 parsecs}
    tuning: {max_rows_per_partition: {min: 10, max: 5}}
  - source: {path: //q, options: {consumer_path: //c}}
    transform: {sql: "SELECT 1", callable: "a:b"}
    sink: {format: foreachBatch}
    output_mode: upsert
""",
    )

    text = "\n".join(problems)
    expected = [
        "cluster:",
        "http.port:",
        "http.hots: Extra inputs are not permitted",
        "pipeline 'clicks' (pipelines[0]): source: a 'yt' source needs 'path'",
        "pipeline 'clicks' (pipelines[0]): sink.format:",
        "pipeline 'clicks' (pipelines[0]): trigger: '2 parsecs' is not a duration",
        "pipeline 'clicks' (pipelines[0]): tuning: Extra inputs are not permitted",
        "pipeline (pipelines[1]): name: Field required",
        "pipeline (pipelines[1]): transform: set exactly one of 'sql' or 'callable'",
        "pipeline (pipelines[1]): sink: a 'foreachBatch' sink needs 'callable'",
        "pipeline (pipelines[1]): output_mode:",
    ]
    for fragment in expected:
        assert fragment in text
    assert len(problems) == len(expected)


def test_duplicate_pipeline_names_are_reported_with_other_problems(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        """
pipelines:
  - {name: a, source: {path: //q, options: {consumer_path: //c}}, sink: {format: console}}
  - {name: a, source: {path: //q, options: {consumer_path: //c}}, sink: {format: nope}}
""",
    )

    assert any("repeated: a" in p for p in problems)
    assert any("sink.format" in p for p in problems)


def test_duplicate_names_alone_are_rejected(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        """
pipelines:
  - {name: a, source: {path: //q, options: {consumer_path: //c}}, sink: {format: console}}
  - {name: a, source: {path: //q, options: {consumer_path: //c}}, sink: {format: console}}
""",
    )

    assert problems == ["(top level): pipeline names must be unique; repeated: a"]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("pipelines: [\n", "not valid YAML"),
        ("- just a list\n", "top level must be a mapping"),
        ("cluster: local:///x\n", "pipelines: Field required"),
        ("pipelines: []\n", "pipelines: List should have at least 1 item"),
    ],
)
def test_malformed_files_are_reported_with_the_file_name(tmp_path: Path, text: str, fragment: str) -> None:
    assert any(fragment in p for p in problems_of(tmp_path, text))


def test_missing_file_is_reported_with_its_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.yaml"):
        load_config(tmp_path / "missing.yaml")


def test_bad_pipeline_name_and_callable_reference_are_rejected(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        yaml.safe_dump(
            {
                "pipelines": [
                    {
                        "name": "has space",
                        "source": {"path": "//q", "options": {"consumer_path": "//c"}},
                        "transform": {"callable": "no_colon"},
                        "sink": {"format": "console"},
                    }
                ]
            }
        ),
    )

    assert any("pipelines[0]): name:" in p for p in problems)
    assert any("transform.callable:" in p for p in problems)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("2 seconds", 2.0), ("1 second", 1.0), ("500 milliseconds", 0.5), ("1 minute", 60.0), ("interval 1 hour", 3600)],
)
def test_processing_time_durations_are_parsed(text: str, seconds: float) -> None:
    assert parse_duration_seconds(text) == seconds


def test_seed_best_practices_for_stateless_pipelines(tmp_path: Path) -> None:
    config = OpsdConfig.model_validate(
        {"pipelines": [{"name": "p", "source": {"path": "//q", "options": {"consumer_path": "//c"}},
                        "sink": {"format": "console"}}]}
    )

    defaults = spark_defaults(config)

    assert defaults.pop(JAVA_OPTIONS).startswith("-Dlog4j2.configurationFile=")
    assert defaults == {
        "spark.sql.streaming.minBatchesToRetain": "2",
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.streaming.adaptiveExecution.enabled": "true",
        "spark.streaming.stopGracefullyOnShutdown": "true",
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "true",
        "spark.ui.killEnabled": "false",
        "spark.ui.port": "4040",
        "spark.executor.processTreeMetrics.enabled": "true",
        "spark.executor.metrics.pollingInterval": "200ms",
        "spark.eventLog.logStageExecutorMetrics": "true",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
    }


def test_spark_logs_in_the_configured_level_and_format_and_the_users_jvm_options_win() -> None:
    config = OpsdConfig.model_validate({
        "logging": {"spark_level": "error", "format": "console"},
        "spark": {"conf": {JAVA_OPTIONS: "-Dopsd.spark.logLevel=info -Xss4m"}},
        "pipelines": [{"name": "p", "source": {"format": "rate"}, "sink": {"format": "console"}}]})

    options = spark_defaults(config)[JAVA_OPTIONS].split()

    assert f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()}" in options
    assert "-Dopsd.spark.logFormat=console" in options
    assert options.index("-Dopsd.spark.logLevel=error") < options.index("-Dopsd.spark.logLevel=info")
    assert options[-1] == "-Xss4m"
    assert LOG4J2_CONFIG.is_file()


def test_logging_levels_are_checked_and_case_insensitive(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, """
logging: {level: debug, spark_level: loud, levels: {apscheduler: info, py4j: chatty}}
pipelines: [{name: p, source: {format: rate}, sink: {format: console}}]
""")

    assert [p.split(":")[0] for p in problems] == ["logging.spark_level", "logging.levels.py4j"]


def test_the_spark_ui_port_is_configurable_and_the_users_conf_can_still_turn_the_ui_off() -> None:
    config = OpsdConfig.model_validate({
        "spark": {"ui_port": 4999, "conf": {"spark.ui.enabled": "false"}},
        "pipelines": [{"name": "p", "source": {"path": "//q", "options": {"consumer_path": "//c"}},
                       "sink": {"format": "console"}}]})
    assert spark_defaults(config)["spark.ui.port"] == "4999"
    assert spark_defaults(config)["spark.ui.enabled"] == "false"


def test_stateful_pipeline_keeps_spark_default_retention_and_user_conf_wins(tmp_path: Path) -> None:
    defaults = spark_defaults(load_config(write(tmp_path, VALID)))

    assert "spark.sql.streaming.minBatchesToRetain" not in defaults
    assert defaults["spark.sql.adaptive.enabled"] == "true"
    assert defaults["spark.sql.shuffle.partitions"] == "4"


def test_keys_that_nothing_reads_yet_are_refused(tmp_path: Path) -> None:
    """Intervals of checks that do not exist and keys no check reads would do nothing: a user must not rely on them."""
    problems = problems_of(tmp_path, """
checks: {bogus_seconds: 30}
pipelines:
  - name: p
    source: {path: //q, options: {consumer_path: //c}}
    sink: {format: console}
    tuning: {max_rows_per_partition: {min: 1, max: 10}, dyn_batch_size: {min: 1, max: 10}}
""")
    for key in ("checks.bogus_seconds", "pipeline 'p' (pipelines[0]): tuning"):
        assert any(p.startswith(f"{key}: Extra inputs are not permitted") for p in problems), (key, problems)


def test_autotune_bounds_must_be_ordered_and_the_mode_defaults_by_who_runs_the_query(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, """
pipelines:
  - name: p
    source: {path: //q, options: {consumer_path: //c}}
    sink: {format: console}
    autotune: {mode: sometimes, min_rows_per_partition: 10, max_rows_per_partition: 5}
""")
    assert any(p.startswith("pipeline 'p' (pipelines[0]): autotune.mode") for p in problems), problems
    with pytest.raises(ValueError, match="min_rows_per_partition must not exceed max_rows_per_partition"):
        AutotuneSettings(min_rows_per_partition=10, max_rows_per_partition=5)
    assert (AutotuneSettings().mode_for(watched=True), AutotuneSettings().mode_for(watched=False)) == \
        ("recommend", "apply")
    assert AutotuneSettings(mode="off").mode_for(watched=False) == "off"


def test_every_config_key_has_a_description() -> None:
    from pydantic import BaseModel

    seen: set[type] = set()

    def walk(model: type[BaseModel]) -> None:
        seen.add(model)
        for name, field in model.model_fields.items():
            nested = [t for t in getattr(field.annotation, "__args__", (field.annotation,))
                      if isinstance(t, type) and issubclass(t, BaseModel)]
            if nested:
                for child in nested:
                    if child not in seen:
                        walk(child)
            else:
                assert field.description, f"{model.__name__}.{name} has no description"

    walk(OpsdConfig)


def test_a_config_that_is_not_utf8_is_a_config_error_naming_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "opsd.yaml"
    path.write_bytes("pipelines: []  # caf\u00e9\n".encode("latin-1"))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(path) in str(caught.value) and "not UTF-8" in str(caught.value) and "0xe9" in str(caught.value)


def test_a_yt_source_without_consumer_path_is_refused_at_load(tmp_path: Path) -> None:
    """It would otherwise pass validation and loop for ever at start with no cause in the log."""
    problems = problems_of(tmp_path, """
pipelines: [{name: p, source: {path: //q}, sink: {format: console}}]
""")
    assert problems == ["pipeline 'p' (pipelines[0]): source: a 'yt' source needs options.consumer_path (the "
                        "consumer whose offsets the query reads and acknowledges, e.g. //home/project/consumer)"]


# -- secrets in a config file: refused, and never echoed by an error ----------------------------------------------

TOKEN = "AQAD-config-secret-0123456789"
PIPELINE = "{name: p, source: {path: //q, options: {consumer_path: //c}}, sink: {format: console}}"


@pytest.mark.hostile
@pytest.mark.parametrize(("where", "text"), [
    ("spark.conf", f"spark: {{conf: {{spark.hadoop.yt.token: {TOKEN}}}}}\npipelines: [{PIPELINE}]"),
    ("spark.conf", f"spark: {{conf: {{spark.executorEnv.YT_TOKEN: {TOKEN}}}}}\npipelines: [{PIPELINE}]"),
    ("spark.conf", f"spark: {{conf: {{spark.authenticate.secret: {TOKEN}}}}}\npipelines: [{PIPELINE}]"),
    ("spark.conf", f"spark: {{conf: {{spark.ssl.keyPassword: {TOKEN}}}}}\npipelines: [{PIPELINE}]"),
    ("source.options", "pipelines: [{name: p, source: {path: //q, options: {consumer_path: //c, "
                       f"token: {TOKEN}}}}}, sink: {{format: console}}}}]"),
    ("sink.options", "pipelines: [{name: p, source: {path: //q, options: {consumer_path: //c}}, "
                     f"sink: {{format: console, options: {{api_key: {TOKEN}}}}}}}]"),
], ids=["yt-token", "executor-env", "spark-auth-secret", "ssl-password", "source-option", "sink-option"])
def test_a_secret_in_the_config_is_refused_naming_the_key_and_never_shown(tmp_path: Path, where: str,
                                                                         text: str) -> None:
    [problem] = problems_of(tmp_path, text)

    assert where in problem and "would hold a secret" in problem and "YT_TOKEN environment variable" in problem
    assert TOKEN not in problem


def test_keys_that_only_refer_to_a_secret_are_accepted(tmp_path: Path) -> None:
    conf = {"spark.kubernetes.executor.secretKeyRef.YT_TOKEN": "opsd-yt-token:token",
            "spark.kubernetes.driver.secrets.spark-auth": "/etc/spark-auth",
            "spark.authenticate.secret.file": "/etc/spark-auth/secret",
            "spark.kubernetes.authenticate.driver.oauthTokenFile": "/var/run/token"}
    config = load_config(write(tmp_path, yaml.safe_dump({"spark": {"conf": conf}, "pipelines": [
        yaml.safe_load(PIPELINE)]})))

    assert config.spark.conf == conf


@pytest.mark.hostile
@pytest.mark.parametrize("text", [
    f"token: {TOKEN}\npipelines: [{PIPELINE}]",  # an unknown key: its value would be echoed
    f"spark: {{conf: {{spark.hadoop.yt.token: [{TOKEN}]}}}}\npipelines: [{PIPELINE}]",  # a wrong type
    f"cluster: {TOKEN}\npipelines: [{PIPELINE}]",  # the token pasted where a URI belongs ($YT_TOKEN is known)
    f"spark:\n  conf:\n    spark.hadoop.yt.token: {TOKEN}: x\n",  # YAML that does not parse, quoted by PyYAML
], ids=["unknown-key", "wrong-type", "pasted-into-a-field", "bad-yaml"])
def test_no_config_error_echoes_a_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("YT_TOKEN", TOKEN)
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))

    assert TOKEN not in str(caught.value) and caught.value.problems


def test_a_yaml_error_names_line_and_column(tmp_path: Path) -> None:
    assert problems_of(tmp_path, "spark:\n  conf:\n    a: b: c\n") == [
        "not valid YAML: mapping values are not allowed here (line 3, column 9)"]


# -- the Spark UI: kill buttons off, bound to loopback unless asked otherwise -------------------------------------


def ui_config(**spark: object) -> OpsdConfig:
    return OpsdConfig.model_validate({"spark": spark, "pipelines": [yaml.safe_load(PIPELINE)]})


@pytest.mark.hostile
@pytest.mark.parametrize(("spark", "environ", "expected"), [
    ({}, {}, {LOCAL_IP_ENV: "127.0.0.1"}),
    ({"master": "local-cluster[2,1,1024]"}, {}, {LOCAL_IP_ENV: "127.0.0.1"}),
    ({}, {LOCAL_IP_ENV: "10.1.2.3"}, {}),
    ({"master": "k8s://https://api:6443"}, {}, {}),
    ({"ui_host": "0.0.0.0"}, {LOCAL_IP_ENV: "10.1.2.3"}, {LOCAL_IP_ENV: None}),
    ({"ui_host": "10.9.8.7", "master": "spark://m:7077"}, {}, {LOCAL_IP_ENV: "10.9.8.7"}),
], ids=["local", "local-cluster", "env-set", "kubernetes", "every-interface", "chosen"])
def test_the_spark_ui_binds_to_loopback_with_a_local_master_unless_asked_otherwise(
        spark: dict, environ: dict, expected: dict) -> None:
    assert spark_environment(ui_config(**spark), environ) == expected


@pytest.mark.hostile
@pytest.mark.parametrize("ui_host", [None, "0.0.0.0", "10.9.8.7"])
def test_with_a_local_master_the_drivers_rpc_and_block_manager_stay_on_loopback_whatever_the_ui_binds(ui_host):
    for master in ("local[*]", "local-cluster[2,1,1024]"):
        conf = spark_defaults(ui_config(master=master, ui_host=ui_host))
        assert conf["spark.driver.bindAddress"] == conf["spark.driver.host"] == "127.0.0.1"
    # Executors elsewhere must reach the driver: other masters keep Spark's choice (or the chart's, on Kubernetes).
    assert "spark.driver.bindAddress" not in spark_defaults(ui_config(master="spark://m:7077", ui_host=ui_host))
    assert spark_defaults(ui_config(conf={"spark.driver.host": "10.1.1.1"}))["spark.driver.host"] == "10.1.1.1"


def test_the_spark_uis_kill_buttons_are_off_unless_the_conf_turns_them_on() -> None:
    assert spark_defaults(ui_config())["spark.ui.killEnabled"] == "false"
    assert spark_defaults(ui_config(conf={"spark.ui.killEnabled": "true"}))["spark.ui.killEnabled"] == "true"


@pytest.mark.parametrize("uri", ["yt://hahn", "yt+https://proxy:443?ca_bundle=/etc/ssl/yt.pem", "yt+http://h:80",
                                 "local:///var/opsd"])
def test_every_cluster_uri_the_connector_takes_is_accepted(uri: str) -> None:
    config = OpsdConfig.model_validate({"cluster": uri, "pipelines": [
        {"name": "p", "source": {"format": "rate"}, "sink": {"format": "console"}}]})
    assert config.cluster == uri


@pytest.mark.parametrize("uri", ["ftp://x", "yt://https://h:443", "yt://h?token=x"])
def test_a_cluster_uri_the_connector_refuses_is_a_config_error_naming_the_key(tmp_path: Path, uri: str) -> None:
    path = tmp_path / "opsd.yaml"
    path.write_text(yaml.safe_dump({"cluster": uri, "pipelines": [
        {"name": "p", "source": {"format": "rate"}, "sink": {"format": "console"}}]}))
    with pytest.raises(ConfigError, match="cluster"):
        load_config(path)


def test_a_misspelt_key_is_answered_with_the_key_meant_and_an_unknown_one_with_the_keys_taken_there(
        tmp_path: Path) -> None:
    problems = problems_of(tmp_path, """
http: {prot: 9100}
chekcs: {bogus_seconds: 30}
pipelines:
  - name: p
    source: {path: //q, optoins: {consumer_path: //c}}
    sink: {format: console}
    autotune: {mdoe: auto}
""")
    assert sorted(problems) == sorted([
        "http.prot: Extra inputs are not permitted (did you mean 'port'?)",
        "chekcs: Extra inputs are not permitted (did you mean 'checks'?)",
        "pipeline 'p' (pipelines[0]): source.optoins: Extra inputs are not permitted (did you mean 'options'?)",
        "pipeline 'p' (pipelines[0]): autotune.mdoe: Extra inputs are not permitted (did you mean 'mode'?)",
    ])
    unknown = problems_of(tmp_path, VALID + "checks: {bogus_seconds: 30}\n")
    assert len(unknown) == 1 and unknown[0].startswith("checks.bogus_seconds: Extra inputs are not permitted (known "
                                                       "keys here: ") and "desync_seconds" in unknown[0]


@pytest.mark.parametrize(("spark_level", "failure_lines"), [
    ("warn", "hide"), ("error", "hide"), ("info", "show"), ("debug", "show"), ("trace", "show")])
def test_spark_says_a_failed_task_in_its_own_lines_only_below_warn(spark_level: str, failure_lines: str) -> None:
    """Above INFO, opsd's one query_failed line speaks for the seven lines Spark writes about one failed task."""
    config = OpsdConfig.model_validate({
        "logging": {"spark_level": spark_level},
        "pipelines": [{"name": "p", "source": {"format": "rate"}, "sink": {"format": "console"}}]})

    assert f"-Dopsd.spark.failureLines={failure_lines}" in spark_defaults(config)[JAVA_OPTIONS].split()


def test_a_key_an_earlier_release_took_is_answered_with_what_replaced_it(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, """
pipelines:
  - name: p
    source: {format: rate}
    sink: {format: console}
    autotune: {dyn_batch_size_step: 10000}
""")
    assert problems == [
        "pipeline 'p' (pipelines[0]): autotune.dyn_batch_size_step: Extra inputs are not permitted (renamed: "
        "dyn_batch_size_step_up, a factor (1.5 by default) where this was rows added per step)"]
