"""Checkpoint files are read without following links, never block, and their content is never quoted (issue 32):
a symlink to a mode-0600 file, a linked `offsets/` folder, a FIFO where a batch file belongs."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from opsd.checks.desync.check import DesyncCheck
from opsd.collect.positions import PositionsCollector, QueryTarget
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.telemetry.metrics import Metrics
from streaming_core.checkpoint import CheckpointError, read_checkpoint
from tests.support.checkpoint import job_with_checkpoint

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(30)]

SECRET = "SECRET-0600-content-do-not-show"


@pytest.fixture
def job(yt, yt_root: str, tmp_path: Path) -> tuple[str, str, Path]:
    q, c, location = job_with_checkpoint(yt, yt_root, tmp_path / "cp", {0: {0: 4, 1: 4}, 1: {0: 9, 1: 9}},
                                         committed=1, rows=20, consumer_at=5)
    return q, c, Path(location)


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "private"
    path.write_text(f"v1\n{SECRET}\n")
    path.chmod(0o600)
    return path


def test_a_batch_file_linked_to_another_file_is_refused_unread(job, secret: Path) -> None:
    _, _, location = job
    (location / "offsets" / "1").unlink()
    (location / "offsets" / "1").symlink_to(secret)

    with pytest.raises(CheckpointError, match="offsets/1: cannot be read") as error:
        read_checkpoint(str(location))
    assert SECRET not in str(error.value)


def test_a_linked_offsets_folder_is_refused(job, tmp_path: Path) -> None:
    _, _, location = job
    (location / "offsets").rename(tmp_path / "elsewhere")
    (location / "offsets").symlink_to(tmp_path / "elsewhere")

    with pytest.raises(OSError):
        read_checkpoint(str(location))


def test_content_is_never_quoted(job) -> None:
    _, _, location = job
    (location / "offsets" / "1").write_text(f"{SECRET}\n{{}}\n")

    with pytest.raises(CheckpointError) as error:
        read_checkpoint(str(location))
    assert SECRET not in str(error.value) and SECRET[:10] not in str(error.value)


def test_a_fifo_never_blocks_the_reader_nor_the_daemons_check(job, cluster_uri: str) -> None:
    q, c, location = job
    (location / "offsets" / "1").unlink()
    os.mkfifo(location / "offsets" / "1")
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    check = DesyncCheck(recorder, PositionsCollector(cluster_uri, [QueryTarget("job", str(location), q, c,
                                                                               heal=True)]))

    started = time.monotonic()
    with pytest.raises(CheckpointError, match="offsets/1: cannot be read"):
        read_checkpoint(str(location))
    check.run()

    assert time.monotonic() - started < 5
    [facts] = recorder.status.get("job").desync.values()
    assert "offsets/1: cannot be read" in facts.desync.facts.problem
