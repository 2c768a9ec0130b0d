"""Across config files, a second opsd never runs a query on a checkpoint location or a consumer another opsd's
pipeline holds (issue 32): each pipeline claims them (a lock file in the checkpoint, one per consumer under the
embedded cluster's root) while opsd runs; another config naming one is refused naming both pipelines and files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from opsd.config.claims import CLAIMS_FOLDER, LOCK_NAME, ClaimError, claimed, claims
from opsd.config.load import load_config
from tests.support.claims import start_holder
from tests.support.daemon import OPSD

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(60)]


def config(tmp_path: Path, file: str, pipeline: str, checkpoint: str, consumer: str) -> Path:
    path = tmp_path / file
    path.write_text(yaml.safe_dump({"cluster": f"local://{tmp_path / 'cluster'}", "pipelines": [
        {"name": pipeline, "source": {"path": "//home/q", "options": {"consumer_path": consumer}},
         "sink": {"format": "console"}, "checkpoint_location": checkpoint}]}))
    return path


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another opsd (a process) holding the claims of a.yaml: pipeline `a` on /cp-a and //home/consumer."""
    first = config(tmp_path, "a.yaml", "a", str(tmp_path / "cp-a"), "//home/consumer")
    process = start_holder(first)
    yield process
    if process.poll() is None:
        process.kill()
    process.wait(10)


@pytest.mark.parametrize(("checkpoint", "consumer", "kind"), [
    ("cp-a", "//home/other", "checkpoint location"),
    ("cp-b", "//home/consumer/", "consumer"),
])
def test_a_second_config_sharing_a_checkpoint_or_a_consumer_is_refused_naming_both(
        tmp_path: Path, holder: subprocess.Popen[str], checkpoint: str, consumer: str, kind: str) -> None:
    second = config(tmp_path, "b.yaml", "b", str(tmp_path / checkpoint), consumer)
    with pytest.raises(ClaimError) as error, claimed(load_config(second), second):
        pass
    [problem] = error.value.problems
    assert f"pipeline 'b' of {second}" in problem and f"pipeline 'a' of {tmp_path / 'a.yaml'}" in problem
    assert f"share the {kind}" in problem and f"pid {holder.pid}" in problem


def test_opsd_run_with_the_second_config_is_refused_before_spark_starts(tmp_path: Path, holder) -> None:
    second = config(tmp_path, "b.yaml", "b", str(tmp_path / "cp-a"), "//home/other")
    result = subprocess.run([*OPSD, "run", str(second)], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0 and "share the checkpoint location" in result.stderr, result.stderr
    assert "pipeline 'a'" in result.stderr and "SparkContext" not in result.stderr


def test_a_claim_ends_with_its_process_however_it_ends(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    holder.send_signal(signal.SIGKILL)
    holder.wait(10)
    second = config(tmp_path, "b.yaml", "b", str(tmp_path / "cp-a"), "//home/consumer")
    with claimed(load_config(second), second) as held:
        assert {c.kind for c in held} == {"checkpoint location", "consumer"}
        owner = json.loads((tmp_path / "cp-a" / LOCK_NAME).read_text())
        assert owner["pipeline"] == "b" and owner["pid"] == os.getpid()


def test_claims_on_the_embedded_cluster_are_lock_files_under_its_root(tmp_path: Path) -> None:
    path = config(tmp_path, "a.yaml", "a", "yt:///home/cp", "//home/c")
    found = claims(load_config(path))
    assert [c.lock for c in found] == [tmp_path / "cluster" / "home" / "cp" / LOCK_NAME,
                                      *[c.lock for c in found if c.kind == "consumer"]]
    assert found[1].lock.parent == tmp_path / "cluster" / CLAIMS_FOLDER
    assert all(c.node is None for c in found)


def test_a_crafted_lock_file_is_shown_escaped_and_a_linked_one_is_refused(tmp_path: Path) -> None:
    import fcntl

    lock = tmp_path / "cp-a" / LOCK_NAME
    lock.parent.mkdir()
    lock.write_text(json.dumps({"pipeline": "\x1b]0;pwned\x07" + "x" * 5000, "config": "/etc/x", "pid": 1}))
    with open(lock) as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # held by this descriptor: the claim below opens its own
        second = config(tmp_path, "b.yaml", "b", str(tmp_path / "cp-a"), "//home/c")
        with pytest.raises(ClaimError) as error, claimed(load_config(second), second):
            pass
    assert "\x1b" not in str(error.value) and len(str(error.value)) < 1500

    lock.unlink()
    lock.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError), claimed(load_config(second), second):
        pass
    assert not (tmp_path / "elsewhere").exists()
