"""`opsd demo` end to end, as a person runs it: in a terminal (tmux, so the screen is what a terminal shows), with
its own Spark. The view must be the only thing on screen, and its numbers those of the result table."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from opsd.cli import main
from opsd.demo.scenario import RESULT
from streaming_core.cluster import connect
from tests.support.sink import ordered_rows
from tests.support.wait import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.tmux]

DEMO_TIMEOUT_SECONDS = 400.0
ROOT = Path(__file__).resolve().parent.parent
#: What Spark's JVM and log4j print when they reach a terminal (the lines the issue saw in the view).
SPARK_OUTPUT = re.compile(r"\b(WARN|INFO|ERROR)\b|log4j|incubator|NativeCodeLoader|loopback|falling behind"
                          r"|job group|\[Stage \d|\"level\"")


def tmux(socket: Path, *args: str) -> str:
    return subprocess.run(["tmux", "-S", str(socket), *args], capture_output=True, text=True, check=True,
                          timeout=30).stdout


def counted(screen: str, label: str) -> list[int]:
    """Every number shown after `label` (in the view's grid or the summary's table), in screen order."""
    pattern = rf"^[\s│]*{re.escape(label)}\s+│?\s*([\d,]+)"
    return [int(n.replace(",", "")) for n in re.findall(pattern, screen, re.M)]


@pytest.fixture(scope="module")
def screen_of_a_demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """Run `opsd demo` in a 100x40 tmux terminal; returns everything the terminal showed (with its scrollback,
    lines the terminal wrapped joined) once it exited, and the demo's root."""
    if shutil.which("tmux") is None:
        pytest.fail("tmux is needed (make system-packages installs it)")
    work = tmp_path_factory.mktemp("demo")
    root, socket = work / "demo", work / "tmux.sock"
    command = shlex.join([sys.executable, "-m", "opsd.cli", "demo", "--duration", "5", "--rate", "500",
                          "--partitions", "2", "--port", "0", "--root", str(root)])
    shell = f"cd {shlex.quote(str(ROOT))} && nice -n 10 {command}; echo demo-exit=$?; sleep 600"
    tmux(socket, "new-session", "-d", "-x", "100", "-y", "40", shell)
    try:
        wait_until(lambda: "demo-exit=" in tmux(socket, "capture-pane", "-p"), DEMO_TIMEOUT_SECONDS, "the demo")
        return tmux(socket, "capture-pane", "-p", "-J", "-S", "-"), root
    finally:
        subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True, timeout=30)


def test_the_demo_screen_is_its_view_alone_and_its_numbers_are_the_result_tables(
        screen_of_a_demo_run: tuple[str, Path]) -> None:
    screen, root = screen_of_a_demo_run

    assert "demo-exit=0" in screen, screen
    assert [line for line in screen.splitlines() if SPARK_OUTPUT.search(line)] == [], screen
    assert screen.count("rows produced") == 1, f"one view, redrawn in place, no stale copies:\n{screen}"
    with connect(f"local://{root}") as cluster:
        rows = ordered_rows(cluster, RESULT)
    produced, written = counted(screen, "rows produced")[0], counted(screen, "rows written")[0]
    assert produced >= 1000, "5 s at 500 rows/s"
    assert written == produced == len(rows)
    assert counted(screen, "rows in (produced)") == counted(screen, "rows out (result table)") == [len(rows)]
    assert counted(screen, "batches done") == counted(screen, "batches") and counted(screen, "batches")[0] >= 1
    assert sorted(r["data"] for r in rows) == sorted(f"row-{i}" for i in range(produced))
    assert all(r["data_length"] == len(r["data"]) for r in rows)


def test_spark_and_opsd_logs_go_to_the_log_file_beside_the_root(screen_of_a_demo_run: tuple[str, Path]) -> None:
    screen, root = screen_of_a_demo_run
    log_file = root.with_name("demo.log")

    assert f"logs in {log_file}" in screen
    text = log_file.read_text().splitlines()
    assert [line for line in text if not line.startswith("{") or '"logger": "org.apache.' in line], \
        "what Spark printed is in the file"
    events = [json.loads(line) for line in text if line.startswith("{")]
    batches = [e["batch_id"] for e in events if e["event"] == "batch_completed"]
    assert batches == list(range(counted(screen, "batches")[0]))


def test_the_summary_is_followed_by_next_steps_that_work(screen_of_a_demo_run: tuple[str, Path],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    screen, root = screen_of_a_demo_run
    steps = re.findall(r"^\s+(opsd (?:table read|queue inspect) \S+ --cluster \S+)\s+#", screen, re.M)

    assert [shlex.split(step)[1:3] for step in steps] == [["table", "read"], ["queue", "inspect"]], screen
    assert all(shlex.split(step)[-1] == f"local://{root}" for step in steps)
    for step in steps:
        assert main(shlex.split(step)[1:]) == 0, step
    out = capsys.readouterr().out
    assert "data_length" in out and "//home/demo/queue" in out
