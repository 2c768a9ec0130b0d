"""The graceful-shutdown timeout takes the seeds' milliseconds or a Spark duration."""

import pytest

from opsd.config import OpsdConfig
from opsd.daemon import GRACEFUL_TIMEOUT_KEY, graceful_timeout_seconds


def _config(conf: dict) -> OpsdConfig:
    return OpsdConfig.model_validate({"spark": {"conf": conf}, "pipelines": [
        {"name": "p", "source": {"format": "rate"}, "sink": {"format": "console"}}]})


@pytest.mark.parametrize(("value", "seconds"), [("45000", 45.0), ("30 seconds", 30.0), ("2 minutes", 120.0)])
def test_timeout_accepts_milliseconds_and_durations(value: str, seconds: float) -> None:
    assert graceful_timeout_seconds(_config({GRACEFUL_TIMEOUT_KEY: value})) == seconds


def test_timeout_defaults_to_thirty_seconds() -> None:
    assert graceful_timeout_seconds(_config({})) == 30.0


def test_unparseable_timeout_names_the_value() -> None:
    with pytest.raises(ValueError, match="'soon'"):
        graceful_timeout_seconds(_config({GRACEFUL_TIMEOUT_KEY: "soon"}))
