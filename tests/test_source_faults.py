"""Fault injection and process isolation, each in a child driver process with its own Spark session:
a driver killed mid-batch replays that batch only; separate executor JVMs (`local-cluster`) read every row
once and acknowledge them in the consumer, proving nothing relies on state in the driver process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyspark
import pytest

from tests.support.cluster import make_queue
from tests.support.source import checkpoint_of, numbered
from tests.support.wait import wait_until

pytestmark = pytest.mark.spark

SCRIPT = Path(__file__).parent / "scripts" / "stream_to_jsonl.py"
REPO = Path(__file__).parent.parent


def child_env(tmp_path: Path) -> dict[str, str]:
    """The driver's environment: the venv's Python for workers, and a SPARK_HOME of symlinks so that
    executors write their `work/` folders under `tmp_path`, not into the installed pyspark package."""
    home = tmp_path / "spark_home"
    home.mkdir(exist_ok=True)
    package = Path(pyspark.__file__).parent
    for name in ("bin", "jars", "python", "sbin"):
        if not (home / name).exists():
            (home / name).symlink_to(package / name)
    return {**os.environ, "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_HOME": str(home), "PYTHONPATH": str(REPO)}


def stream(cluster_uri: str, queue: str, consumer: str, checkpoint: str, output: Path, *extra: str,
           tmp_path: Path) -> subprocess.Popen:
    # A new session so that the kill reaches the driver's JVM too.
    return subprocess.Popen([sys.executable, str(SCRIPT), cluster_uri, queue, consumer, checkpoint, str(output),
                             *extra], env=child_env(tmp_path), cwd=tmp_path, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, timeout: float = 300) -> None:
    _, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]


def output_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_driver_killed_mid_batch_replays_that_batch_only(yt, yt_root, cluster_uri, tmp_path):
    q, c = f"{yt_root}/queue", f"{yt_root}/consumer"
    make_queue(yt, q, consumer=c)
    yt.insert_rows(q, numbered(200))
    output, marker = tmp_path / "out.jsonl", tmp_path / "hung"
    args = (cluster_uri, q, c, checkpoint_of(yt_root), output)
    driver = stream(*args, "--max-rows", "25", "--hang-on-batch", "2", "--marker", str(marker), tmp_path=tmp_path)

    def hung() -> bool:
        if marker.exists():
            return True
        assert driver.poll() is None, driver.stderr.read()[-3000:]
        return False

    wait_until(hung, 300, "batch 2 to start")
    os.killpg(driver.pid, signal.SIGKILL)  # the Python driver and its JVM
    driver.wait()
    interrupted = sorted(r["n"] for r in output_rows(output) if r["batch"] == 2)

    finish(stream(*args, "--max-rows", "25", "--marker", str(marker), tmp_path=tmp_path))
    rows = output_rows(output)
    counts = Counter(r["n"] for r in rows)
    assert set(counts) == set(range(200))
    assert sorted(n for n, k in counts.items() if k > 1) == interrupted
    assert max(counts.values()) == 2
    assert len(interrupted) == 50
    # The replay is the same batch: same id, same rows.
    assert sorted(r["n"] for r in rows if r["batch"] == 2) == sorted(interrupted * 2)


def test_separate_executor_jvms_read_every_row_exactly_once(yt, yt_root, cluster_uri, tmp_path):
    q, c = f"{yt_root}/queue", f"{yt_root}/consumer"
    make_queue(yt, q, consumer=c)
    yt.insert_rows(q, numbered(120))
    output = tmp_path / "out.jsonl"
    finish(stream(cluster_uri, q, c, checkpoint_of(yt_root), output, "--master", "local-cluster[2,1,1024]",
                  "--max-rows", "40", tmp_path=tmp_path))
    rows = output_rows(output)
    assert sorted(r["n"] for r in rows) == list(range(120))
    assert Counter(r["batch"] for r in rows) == {0: 80, 1: 40}
    # Batches end at rows 39 and 59 of each partition; planning the second acknowledged the first.
    assert yt.get_consumer_offsets(c, q) == {0: 40, 1: 40}
