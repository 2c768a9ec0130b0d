"""structlog configuration: JSON lines off a terminal, console on one, and no secrets either way."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import structlog
from prometheus_client import CollectorRegistry

from opsd.checks.scheduler import CheckScheduler
from opsd.telemetry.logs import children_write_to, configure_logging
from opsd.telemetry.metrics import Metrics
from opsd.telemetry.redaction import REDACTED, Redactor
from tests.support.ports import free_port

TOKEN = "AQAD-qJSJKeyabcdef0123456789"


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


def redact(**event: object) -> dict[str, object]:
    return dict(Redactor([TOKEN])(None, "info", dict(event)))


def test_secret_named_keys_are_masked_at_any_depth() -> None:
    event = redact(
        event="connect",
        token="t",
        password="p",
        client_secret="s",
        headers={"Authorization": "OAuth x", "Accept": "json"},
        items=[{"api_key": "k"}],
    )

    assert event["token"] == event["password"] == event["client_secret"] == REDACTED
    assert event["headers"] == {"Authorization": REDACTED, "Accept": "json"}
    assert event["items"] == [{"api_key": REDACTED}]
    assert event["event"] == "connect"


def test_the_yt_token_value_is_masked_wherever_it_appears() -> None:
    event = redact(event="request_failed", url=f"http://proxy/?t={TOKEN}", args=("x", TOKEN))

    assert TOKEN not in json.dumps(event)
    assert event["args"] == ("x", REDACTED)


def test_oauth_credentials_in_free_text_are_masked() -> None:
    event = redact(event="http", request="GET / Authorization: OAuth some-other-token")

    assert event["request"] == f"GET / Authorization: OAuth {REDACTED}"


def test_empty_secret_fields_stay_visible_for_debugging() -> None:
    assert redact(event="e", token=None)["token"] is None


def test_non_terminal_output_is_json_lines_with_level_time_and_no_secrets(
    restore_logging: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YT_TOKEN", TOKEN)
    stream = io.StringIO()
    configure_logging(stream=stream)

    structlog.get_logger("opsd.test").info("batch_committed", query="clicks", batch_id=3, note=f"used {TOKEN}")
    logging.getLogger("apscheduler.scheduler").warning("job %s missed with %s", "x", TOKEN)

    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["event"] == "batch_committed"
    assert (first["query"], first["batch_id"], first["level"]) == ("clicks", 3, "info")
    assert first["note"] == f"used {REDACTED}"
    assert "timestamp" in first
    assert second["logger"] == "apscheduler.scheduler"
    assert TOKEN not in second["event"]


def test_tracebacks_are_rendered_into_the_json_line(restore_logging: None) -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)

    try:
        raise ValueError("boom")
    except ValueError:
        structlog.get_logger().exception("check_failed", check="desync")

    line = json.loads(stream.getvalue())
    assert line["check"] == "desync"
    assert "ValueError: boom" in line["exception"]


def test_terminal_output_is_human_readable(restore_logging: None) -> None:
    stream = FakeTTY()
    configure_logging(stream=stream)

    structlog.get_logger().info("query_started", query="clicks")

    text = stream.getvalue()
    assert "query_started" in text and "clicks" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


def test_reconfiguring_does_not_duplicate_lines(restore_logging: None) -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    configure_logging(stream=stream)

    structlog.get_logger().info("once")

    assert len(stream.getvalue().splitlines()) == 1


def scheduler_lines(levels: dict[str, str] | None) -> list[dict[str, object]]:
    """What a running check scheduler logs at INFO in 0.3 s of a check every 0.05 s."""
    stream = io.StringIO()
    configure_logging(level="INFO", stream=stream, json_lines=True, levels=levels)
    scheduler = CheckScheduler(Metrics(CollectorRegistry()))
    scheduler.add_check("watchdog", lambda: None, 0.05)
    scheduler.start()
    time.sleep(0.3)
    scheduler.shutdown()
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_scheduler_chatter_stays_out_of_the_info_stream(restore_logging: None) -> None:
    assert [line for line in scheduler_lines(None) if str(line["logger"]).startswith("apscheduler")] == []


def test_a_third_party_loggers_level_can_be_raised_back(restore_logging: None) -> None:
    lines = scheduler_lines({"apscheduler": "info"})

    assert any('Running job "watchdog' in str(line["event"]) for line in lines)


def test_level_filters_debug_events(restore_logging: None) -> None:
    stream = io.StringIO()
    configure_logging(level="INFO", stream=stream)

    structlog.get_logger().debug("batch_progress")

    assert stream.getvalue() == ""


def test_children_started_inside_write_to_the_file_for_good(tmp_path, capfd: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "children.log"
    script = "import sys, time; print('early', flush=True); time.sleep(0.5); print('late', file=sys.stderr)"
    with children_write_to(log):
        child = subprocess.Popen([sys.executable, "-c", script])
    print("parent", flush=True)
    child.wait(30)

    assert log.read_text().split() == ["early", "late"]
    assert capfd.readouterr() == ("parent\n", "")


# -- secrets and hostile text in every log format -------------------------------------------------------------

FORMATS = {"json": True, "console": False}


@pytest.mark.hostile
@pytest.mark.parametrize("json_lines", FORMATS.values(), ids=FORMATS.keys())
def test_a_traceback_through_the_client_factory_never_prints_its_token_local(
    restore_logging: None, monkeypatch: pytest.MonkeyPatch, json_lines: bool
) -> None:
    from streaming_core.cluster.ytsaurus.client import default_client_factory

    monkeypatch.delenv("YT_TOKEN", raising=False)  # not a known secret: only leaving out locals keeps it out
    closed_port = free_port()
    stream = FakeTTY()
    configure_logging(stream=stream, json_lines=json_lines)
    try:
        default_client_factory(f"127.0.0.1:{closed_port}", TOKEN, None)
    except Exception:
        structlog.get_logger().exception("cluster_call_failed")

    text = stream.getvalue()
    assert "UnreachableClusterError" in text and "default_client_factory" in text, "the traceback is shown"
    assert TOKEN not in text


@pytest.mark.hostile
@pytest.mark.parametrize("json_lines", FORMATS.values(), ids=FORMATS.keys())
def test_the_yt_clients_own_logger_writes_through_opsds_format_and_redaction(
    restore_logging: None, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], json_lines: bool
) -> None:
    import yt.logger  # installs its own stderr handler, as any process using ytsaurus-client does

    monkeypatch.setenv("YT_TOKEN", TOKEN)
    stream = FakeTTY()
    configure_logging(stream=stream, json_lines=json_lines)
    yt.logger.LOGGER.warning("Retrying request with token %s and header Authorization: OAuth %s", TOKEN, "zzz")

    text = stream.getvalue()
    assert "Retrying request" in text and "Yt" in text
    assert TOKEN not in text and "zzz" not in text
    if json_lines:
        assert json.loads(text)["logger"] == "Yt"
    assert capfd.readouterr().err == "", "the client's own handler still writes plain lines"


@pytest.mark.hostile
def test_console_lines_show_control_characters_from_data_escaped(restore_logging: None) -> None:
    stream = FakeTTY()
    configure_logging(stream=stream, json_lines=False)

    hostile = "//q\x1b]0;pwned\x07\r[/oops]"
    structlog.get_logger().warning("queue_missing", path=hostile)
    logging.getLogger("Yt").warning("no such path %s", hostile)  # a library's message: text, not a key-value

    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    for line in lines:
        assert "\x1b]0;" not in line and "\x07" not in line and "\r" not in line
        assert "\\x1b]0;pwned\\x07\\r[/oops]" in line
