"""Hostile text from data through the real `opsd` command (a subprocess on a forced-colour terminal): every command
that prints rows, paths, names or errors shows them as text.

The same text goes everywhere: rich markup that would print a link (`[link=...]`), style (`[bold red]`) or crash
(`[/oops]`, a `MarkupError`), an OSC sequence that sets the terminal's title (ESC ] 0 ; ... BEL), a CSI sequence that
clears the screen, a carriage return and a right-to-left override. It may come back only escaped (`\\x1b`) and
literal (`[/oops]`), never as a traceback. The YT token, set in the environment, never comes back at all.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from opsd.cli.status import PIPELINE_FAILED
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.telemetry.http import OpsHttpServer
from opsd.telemetry.metrics import Metrics
from streaming_core.cluster import Cluster, connect
from tests.support.checkpoint import write_checkpoint
from tests.support.cluster import make_queue
from tests.support.daemon import OPSD

pytestmark = pytest.mark.hostile

HOSTILE = "[link=https://evil.example]click[/link] [/oops] [bold red]red \x1b]0;pwned\x07 \x1b[2J\r\u202eyxz"
#: What must never reach the terminal raw (rich's own colours are CSI `ESC [ ... m` and allowed).
RAW = ("\x1b]", "\x07", "\x1b[2J", "\r", "\u202e")
#: How the hostile text shows: the markup literally, the control characters escaped.
SHOWN = ("[/oops]", "[link=https://evil.example]", "\\x1b]0;pwned\\x07", "\\x1b[2J", "\\r", "\\u202e")
TOKEN = "AQAD-hostile-cli-token-0123456789"


def opsd(*args: str) -> subprocess.CompletedProcess[str]:
    """The `opsd` console entry point in a subprocess that believes it writes to a wide colour terminal."""
    env = {**os.environ, "FORCE_COLOR": "1", "TERM": "xterm-256color", "COLUMNS": "1000", "YT_TOKEN": TOKEN}
    env.pop("NO_COLOR", None)
    return subprocess.run([*OPSD, *args], capture_output=True, text=True, timeout=300,
                          env=env, check=False)


def assert_shown_as_text(result: subprocess.CompletedProcess[str], *codes: int, shown: tuple[str, ...] = SHOWN) -> None:
    output = result.stdout + result.stderr
    assert result.returncode in codes, output
    assert "Traceback" not in output and "MarkupError" not in output
    assert [raw for raw in RAW if raw in output] == []
    assert [text for text in shown if text not in output] == [], output
    assert TOKEN not in output


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[str, Cluster, str, str, Path]]:
    """A cluster whose queue, consumer, rows and checkpoint directory all carry the hostile text."""
    uri = f"local://{tmp_path / 'cluster'}"
    cluster = connect(uri)
    queue, consumer = f"//home/q {HOSTILE}", f"//home/c {HOSTILE}"
    make_queue(cluster, queue, consumer=consumer)
    cluster.insert_rows(queue, [{"data": HOSTILE, "n": i} for i in range(3)] + [{"data": TOKEN, "n": 3}])
    checkpoint = write_checkpoint(tmp_path / f"cp {HOSTILE}", queue, {0: {0: 0, 1: 0}}, committed=0,
                                  consumer=consumer)
    yield uri, cluster, queue, consumer, checkpoint
    cluster.close()


def test_table_read_shows_rows_and_the_path_as_text(world) -> None:
    uri, _, queue, _, _ = world
    assert_shown_as_text(opsd("table", "read", queue, "--cluster", uri), 0)


def test_table_read_json_escapes_control_characters(world) -> None:
    uri, _, queue, _, _ = world
    result = opsd("table", "read", queue, "--cluster", uri, "--json")
    assert result.returncode == 0 and [raw for raw in RAW if raw in result.stdout] == []
    assert json.loads(result.stdout.splitlines()[0])["data"] == HOSTILE


def test_queue_inspect_shows_the_queue_and_consumer_paths_as_text(world) -> None:
    uri, _, queue, _, _ = world
    assert_shown_as_text(opsd("queue", "inspect", queue, "--cluster", uri), 0)


def test_desync_show_shows_the_checkpoint_and_queue_as_text(world) -> None:
    uri, _, _, _, checkpoint = world
    assert_shown_as_text(opsd("desync", "show", "--checkpoint", str(checkpoint), "--cluster", uri), 0)


def test_desync_heal_prints_its_line_as_text(world) -> None:
    uri, _, queue, consumer, checkpoint = world
    assert_shown_as_text(opsd("desync", "heal", "--checkpoint", str(checkpoint), "--queue", queue, "--consumer",
                              consumer,
                              "--cluster", uri, "--dry-run"), 0, 1)


def test_doctor_of_a_checkpoint_shows_it_as_text(world) -> None:
    uri, _, _, _, checkpoint = world
    assert_shown_as_text(opsd("doctor", "--checkpoint", str(checkpoint), "--cluster", uri), 0, 1)


def test_an_error_naming_a_hostile_path_is_shown_as_text(world) -> None:
    uri, *_ = world
    assert_shown_as_text(opsd("table", "read", f"//home/none {HOSTILE}", "--cluster", uri), 1)


@pytest.fixture
def hostile_daemon() -> Iterator[str]:
    """A daemon endpoint whose query has a hostile name and failed with a hostile, token-bearing exception."""
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    recorder.status.update(f"q {HOSTILE}", active=False, exception_class=f"Boom{HOSTILE}",
                           exception=f"Boom: {HOSTILE} with Authorization: OAuth {TOKEN}")
    server = OpsHttpServer(lambda: b"", status=recorder.status.to_json, port=0)
    server.start()
    yield server.url
    server.stop()


def test_doctor_of_a_daemon_shows_names_and_exceptions_as_text(hostile_daemon: str) -> None:
    assert_shown_as_text(opsd("doctor", "--url", hostile_daemon), 1)


def test_status_shows_names_and_exceptions_as_text(hostile_daemon: str) -> None:
    assert_shown_as_text(opsd("status", "--url", hostile_daemon), PIPELINE_FAILED)


@pytest.mark.parametrize("command", ["status", "doctor"])
def test_the_json_outputs_carry_no_token(hostile_daemon: str, command: str) -> None:
    result = opsd(command, "--url", hostile_daemon, "--json")
    assert result.returncode == {"status": PIPELINE_FAILED, "doctor": 1}[command], result.stderr
    assert TOKEN not in result.stdout + result.stderr
    assert "\x1b" not in result.stdout
