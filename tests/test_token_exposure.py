"""The YT token never leaves the process: an unreachable proxy (a closed loopback port) under every log format of
`opsd run`, through the real command, and through the CLI commands that reach a cluster.

`opsd run` is started as users start it, with `YT_TOKEN` set to a distinctive value, at DEBUG with the `Yt` logger
at DEBUG too; it ends before Spark starts, at the claim of its pipeline's consumer on the cluster, and its stdout,
stderr and every file it wrote are searched for the token. The failure itself must be visible (the proxy named), or
the test would prove nothing.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.support.checkpoint import write_checkpoint
from tests.support.daemon import OPSD
from tests.support.ports import free_port

pytestmark = pytest.mark.hostile

TOKEN = "AQAD-unreachable-proxy-token-0123456789xyz"
UNREACHABLE = "cannot be reached"


def environment() -> dict[str, str]:
    env = {**os.environ, "YT_TOKEN": TOKEN, "OPSD_YT_RETRY_SECONDS": "1"}
    env.pop("YT_PROXY", None)
    return env


def config_file(tmp_path: Path, proxy: str, log_format: str) -> Path:
    """A pipeline and a watched query on the unreachable proxy; checks every half second."""
    checkpoint = write_checkpoint(tmp_path / "watched", "//home/q", {0: {0: 4}}, committed=0,
                                  consumer="//home/c", cluster=proxy)
    path = tmp_path / "opsd.yaml"
    path.write_text(yaml.safe_dump({
        "cluster": f"yt://{proxy}",
        "spark": {"master": "local[1]", "conf": {"spark.sql.shuffle.partitions": "1"}},
        "http": {"port": 0},
        "logging": {"format": log_format, "level": "DEBUG", "levels": {"Yt": "DEBUG"}},
        "checks": {name: 0.5 for name in ("watchdog_seconds", "tuning_seconds", "desync_seconds", "lag_seconds",
                                         "autotune_seconds", "oom_risk_seconds")},
        "pipelines": [{"name": "clicks", "source": {"path": "//home/q", "options": {"consumer_path": "//home/c"}},
                       "sink": {"format": "yt", "path": "//home/out"},
                       "checkpoint_location": str(tmp_path / "checkpoint"), "restart": {"max_restarts": 0}}],
        "watch": [{"name": "elsewhere", "checkpoint_location": str(checkpoint)}],
    }))
    return path


class Output:
    """What a child writes to a pipe or a terminal, collected by a thread."""

    def __init__(self, fd: int) -> None:
        self.data = b""
        self._fd = fd
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._fd, 65536)
            except OSError:  # a terminal whose other end closed
                return
            if not chunk:
                return
            self.data += chunk

    def text(self) -> str:
        return self.data.decode(errors="replace")

    def finish(self) -> str:
        self._thread.join(30)
        return self.text()


def get(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode()
    except urllib.error.HTTPError as e:
        return e.read().decode()


@pytest.mark.parametrize("log_format", ["json", "console", "auto-on-a-terminal", "auto-piped"])
def test_an_unreachable_proxy_never_shows_the_token_in_any_log_format(tmp_path: Path, log_format: str) -> None:
    """`opsd run` claims its pipeline's consumer on the cluster before Spark starts (`opsd.config.claims`): an
    unreachable proxy ends it there, named, in every log format without the token."""
    proxy = f"127.0.0.1:{free_port()}"
    config = config_file(tmp_path, proxy, log_format.removesuffix("-on-a-terminal").removesuffix("-piped"))
    out_read, out_write = os.pipe()
    err_read, err_write = pty.openpty() if log_format == "auto-on-a-terminal" else os.pipe()
    process = subprocess.Popen([*OPSD, "run", str(config)], cwd=tmp_path,
                               env=environment(), stdout=out_write, stderr=err_write, stdin=subprocess.DEVNULL)
    os.close(out_write)
    os.close(err_write)
    stdout, stderr = Output(out_read), Output(err_read)
    try:
        assert process.wait(120) != 0
    finally:
        if process.poll() is None:
            process.kill()
    logs = stdout.finish() + stderr.finish()
    os.close(out_read)
    os.close(err_read)

    assert UNREACHABLE in logs and proxy in logs, "the failure is reported, naming the proxy"
    assert TOKEN not in logs and "SparkContext" not in logs
    written = [p for p in tmp_path.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]
    assert written == [], "a file the run wrote holds the token"


@pytest.mark.parametrize("command", [
    ["queue", "inspect", "//home/q"],
    ["table", "read", "//home/q"],
    ["consumer", "create", "//home/c"],
    ["desync", "show", "--checkpoint", "{checkpoint}"],
    ["doctor", "--checkpoint", "{checkpoint}"],
    ["doctor", "--config", "{config}"],
], ids=lambda c: " ".join(c[:2]))
def test_cli_commands_on_an_unreachable_proxy_name_it_and_never_the_token(tmp_path: Path, command: list[str]) -> None:
    proxy = f"127.0.0.1:{free_port()}"
    config = config_file(tmp_path, proxy, "json")
    args = [a.format(checkpoint=tmp_path / "watched", config=config) for a in command]
    result = subprocess.run([*OPSD, *args, "--cluster", f"yt://{proxy}"],
                            capture_output=True, text=True, timeout=120, env=environment(), check=False)
    output = result.stdout + result.stderr

    assert result.returncode != 0 or UNREACHABLE in output, output
    assert UNREACHABLE in output and "Traceback" not in output
    assert TOKEN not in output


def test_every_cli_command_logs_library_warnings_through_opsds_format_and_redaction(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    import structlog

    from opsd.cli import main

    monkeypatch.setenv("YT_TOKEN", TOKEN)
    try:
        assert main(["queue", "create", "//home/q", "--cluster", f"local://{tmp_path / 'cluster'}"]) == 0
        logging.getLogger("Yt").warning("Retrying with token %s", TOKEN)  # as ytsaurus-client logs a retry
        err = capsys.readouterr().err
    finally:
        logging.getLogger().handlers[:] = [h for h in logging.getLogger().handlers if h.get_name() != "opsd"]
        structlog.reset_defaults()
    [line] = [json.loads(line) for line in err.splitlines()]
    assert line["logger"] == "Yt" and line["level"] == "warning" and TOKEN not in err


def test_an_unexpected_error_prints_its_traceback_without_the_token(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import opsd.cli.table
    from opsd.cli import main

    def broken(args: object) -> int:
        token = TOKEN  # a local, as the client factory's, which a traceback with locals would show
        raise RuntimeError(f"unexpected: Authorization: OAuth {token}")

    monkeypatch.setenv("YT_TOKEN", TOKEN)
    monkeypatch.setattr(opsd.cli.table, "read_table", broken)
    code = main(["table", "read", "//t", "--cluster", f"local://{tmp_path}"])
    err = capsys.readouterr().err

    assert code == 1 and err.startswith("opsd: internal error") and "RuntimeError: unexpected" in err
    assert TOKEN not in err


# -- library use: the connector alone, and opsd.attach in a script ----------------------------------------------------

LIBRARY_SCRIPT = """
import logging, sys
{setup}
log = {logger}

def handle_batch():
    token = {token!r}  # a local, as a client factory's: a traceback with locals would show it
    raise RuntimeError("insert failed: Authorization: OAuth " + token)

try:
    handle_batch()
except RuntimeError:
    log.exception("batch_failed", query="clicks")
"""
LIBRARY_WAYS = {
    # The connector in a script without opsd: nobody configured structlog.
    "connector": ("", "__import__('streaming_core.log').log.get_logger('streaming_core.sink')"),
    # opsd.attach's logging (what attach() configures first), in both formats, through the script's logging.
    **{f"attach-{fmt}": (
        "logging.basicConfig(level=logging.INFO, stream=sys.stderr)\n"
        "from opsd.telemetry.logs import configure_library_logging\n"
        f"configure_library_logging(json_lines={fmt == 'json'})",
        "__import__('structlog').get_logger('opsd.runtime')") for fmt in ("json", "console")},
}


@pytest.mark.parametrize("way", LIBRARY_WAYS)
def test_library_use_logs_tracebacks_without_locals_and_never_the_token(way: str) -> None:
    setup, logger = LIBRARY_WAYS[way]
    script = LIBRARY_SCRIPT.format(setup=setup, logger=logger, token=TOKEN)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                            env=environment(), check=True)
    output = result.stdout + result.stderr

    assert "batch_failed" in output and "Traceback" in output and "handle_batch" in output, output
    assert "token = " not in output, "a frame's locals were shown"
    assert TOKEN not in output
    if way == "attach-json":
        assert json.loads(output.splitlines()[-1].split(":", 2)[-1])["event"] == "batch_failed"


def test_attach_keeps_a_structlog_configuration_the_script_chose() -> None:
    import structlog

    from opsd.telemetry.logs import configure_library_logging

    try:
        structlog.configure(processors=[structlog.processors.JSONRenderer()])
        assert configure_library_logging() is False
        assert len(structlog.get_config()["processors"]) == 1
        structlog.reset_defaults()
        assert configure_library_logging() is True
    finally:
        structlog.reset_defaults()


@pytest.mark.parametrize("patch", ['{{token="{token}"', '{{token="{token}";; proxy=}}',
                                   '{{proxy={{url="h"}}; token="{token}"}}x'])
def test_a_malformed_config_patch_never_shows_a_piece_of_the_token(patch: str) -> None:
    """The client's YSON parser quotes a window of a malformed `YT_CONFIG_PATCHES` (the end of the token), which the
    CLI's internal-error output printed: no eight characters of the token in a row may show."""
    env = {**environment(), "YT_CONFIG_PATCHES": patch.format(token=TOKEN)}
    env.pop("YT_TOKEN")
    result = subprocess.run([*OPSD, "queue", "inspect", "//home/q", "--cluster", f"yt://127.0.0.1:{free_port()}"],
                            capture_output=True, text=True, timeout=120, env=env, check=False)
    output = result.stdout + result.stderr

    assert result.returncode != 0 and ("YT_CONFIG_PATCHES" in output or "Yson" in output), output[-2000:]
    assert [TOKEN[i:i + 8] for i in range(len(TOKEN) - 7) if TOKEN[i:i + 8] in output] == []


# -- the connector's own warnings, when a proxy echoes the token in its errors --------------------------------------

ECHOING_PROXY_SCRIPT = """
import http.server, json, logging, sys, threading
{setup}

class EchoingProxy(http.server.BaseHTTPRequestHandler):
    # A proxy (or a balancer in front of one) that quotes a piece of the token it got in its errors.
    def do_GET(self):
        if self.path.rstrip("/") == "/api/v4":  # the commands the client discovers first
            return self.reply(200, [{{"name": name, "input_type": None, "output_type": "structured",
                                      "is_volatile": volatile, "is_heavy": False}}
                                     for name, volatile in (("exists", False), ("get", False), ("set", True),
                                                            ("create", True))])
        token = self.headers.get("Authorization", "").split()[-1]
        self.reply(400, {{"code": 1, "message": f"rejected a token ending {{token[-20:]}}",
                          "attributes": {{}}, "inner_errors": []}})

    do_POST = do_PUT = do_GET

    def reply(self, status, document):
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EchoingProxy)
threading.Thread(target=proxy.serve_forever, daemon=True).start()

from streaming_core.cluster import connect
from streaming_core.tuning import read_tuning
from streaming_core.write_stats import WriteStats, record_write_stats

cluster = connect(f"yt://127.0.0.1:{{proxy.server_port}}")
read_tuning(cluster, "//home/clicks/tuning")
record_write_stats(cluster, "//home/clicks/tuning", WriteStats(calls=1, rows=10, batch_id=3))
"""
#: Each way the connector's warnings are written: the connector alone (nobody configured logging), opsd.attach's
#: library logging and opsd run's logging, in each format.
CONNECTOR_LOGGING = {
    "connector-alone": "",
    **{f"attach-{fmt}": ("logging.basicConfig(level=logging.INFO, stream=sys.stderr)\n"
                         "from opsd.telemetry.logs import configure_library_logging\n"
                         f"configure_library_logging(json_lines={fmt == 'json'})") for fmt in ("json", "console")},
    **{f"opsd-run-{fmt}": ("from opsd.telemetry.logs import configure_logging\n"
                           f"configure_logging(json_lines={fmt == 'json'})") for fmt in ("json", "console")},
}


@pytest.mark.parametrize("way", CONNECTOR_LOGGING)
def test_the_connectors_warnings_never_show_the_token_a_proxy_echoes(way: str) -> None:
    script = ECHOING_PROXY_SCRIPT.format(setup=CONNECTOR_LOGGING[way])
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            env=environment(), check=True)
    output = result.stdout + result.stderr

    assert "tuning_document_ignored" in output and "write_stats_not_recorded" in output, output[-3000:]
    assert "rejected a token ending ***" in output, "the proxy's error is logged, the piece of the token masked"
    assert [TOKEN[i:i + 8] for i in range(len(TOKEN) - 7) if TOKEN[i:i + 8] in output] == []
