"""One duration parser for the whole config, in Spark's forms; a bad one fails at load, naming the key."""

import pytest

from opsd.config.durations import parse_duration_seconds, spark_interval
from opsd.config.load import ConfigError, load_config
from opsd.config.models import GRACEFUL_TIMEOUT_KEY, OpsdConfig, TriggerConfig


def _config(conf: dict) -> OpsdConfig:
    return OpsdConfig.model_validate({"spark": {"conf": conf}, "pipelines": [
        {"name": "p", "source": {"format": "rate"}, "sink": {"format": "console"}}]})


@pytest.mark.parametrize(("text", "seconds"), [
    ("30s", 30.0), ("1m", 60.0), ("1min", 60.0), ("500ms", 0.5), ("2h", 7200.0), ("1d", 86400.0), ("100us", 1e-4),
    ("2 seconds", 2.0), ("1 second", 1.0), ("500 milliseconds", 0.5), ("interval 1 minute", 60.0),
    ("1.5 s", 1.5), ("10 SECONDS", 10.0), ("3 mins", 180.0),
])
def test_spark_time_strings_and_interval_words_parse(text: str, seconds: float) -> None:
    assert parse_duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["soon", "", "10", "-1s", "10 fortnights", "s", "1 2 s"])
def test_anything_else_is_refused_naming_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration like '30s'"):
        parse_duration_seconds(text)


def test_a_bare_number_takes_the_unit_of_its_key() -> None:
    assert parse_duration_seconds("45000", bare_unit="ms") == 45.0


@pytest.mark.parametrize(("value", "seconds"), [
    ("45000", 45.0), ("30 seconds", 30.0), ("2 minutes", 120.0), ("30s", 30.0), ("1m", 60.0)])
def test_graceful_timeout_takes_the_seeds_milliseconds_or_a_duration(value: str, seconds: float) -> None:
    assert _config({GRACEFUL_TIMEOUT_KEY: value}).spark.graceful_timeout_seconds() == seconds


def test_graceful_timeout_defaults_to_thirty_seconds() -> None:
    assert _config({}).spark.graceful_timeout_seconds() == 30.0


def test_a_graceful_timeout_that_is_no_duration_fails_at_load_naming_key_and_value(tmp_path) -> None:
    path = tmp_path / "opsd.yaml"
    path.write_text(f"""
spark: {{conf: {{"{GRACEFUL_TIMEOUT_KEY}": soon}}}}
pipelines: [{{name: p, source: {{format: rate}}, sink: {{format: console}}}}]
""")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert GRACEFUL_TIMEOUT_KEY in str(error.value) and "'soon'" in str(error.value)


def test_processing_time_in_any_form_reaches_spark_in_one_it_takes() -> None:
    assert TriggerConfig(processing_time="1m").spark_kwargs() == {"processingTime": "60000 milliseconds"}
    assert spark_interval(0.25) == "250 milliseconds"
