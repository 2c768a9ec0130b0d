"""Checkpoint files are read without following links, never block, and their content is never quoted (issue 32):
a symlink to a mode-0600 file, a linked `offsets/` folder, a FIFO where a batch file belongs."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from opsd.checks.desync.check import DesyncCheck
from opsd.collect.positions import PositionsCollector, QueryTarget
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.telemetry.metrics import Metrics
from streaming_core.checkpoint import CheckpointError, CypressFiles, read_checkpoint
from tests.support.checkpoint import job_with_checkpoint, write_checkpoint

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


# -- yt:/// checkpoints in Cypress: links are not followed either (through the stand-in and the real client) ----------

@pytest.fixture
def cypress_job(standin, tmp_path: Path) -> Iterator[tuple[CypressFiles, Path, Path]]:
    """A checkpoint in the stand-in's Cypress (its files on the stand-in's disk), and a private file beside it."""
    import yt.wrapper as yt_wrapper

    from tests.support.standin import STANDIN_TOKEN

    name = f"cp-{tmp_path.name}"
    location = write_checkpoint(standin.root / name, "//home/q", {0: {0: 4}, 1: {0: 9}}, committed=0)
    private = standin.root / f"private-{tmp_path.name}"
    private.mkdir()
    (private / "secret").write_text(f"v1\n{SECRET}\n")
    client = yt_wrapper.YtClient(proxy=f"http://{standin.address}", token=STANDIN_TOKEN,
                                 config={"proxy": {"retries": {"enable": False}}})
    yield CypressFiles(client, f"//{name}"), location, private
    shutil.rmtree(location)
    shutil.rmtree(private)


def test_a_cypress_checkpoint_is_read_through_the_client(cypress_job) -> None:
    files, _, _ = cypress_job
    checkpoint = read_checkpoint("yt:///cp", files=files)
    assert (checkpoint.committed_batch, checkpoint.planned.batch_id) == (0, 1)


def test_a_cypress_batch_file_that_is_a_link_is_refused_unread(cypress_job) -> None:
    files, location, private = cypress_job
    (location / "offsets" / "1").unlink()
    (location / "offsets" / "1").symlink_to(private / "secret")  # a Cypress link to another node

    with pytest.raises(CheckpointError, match=r"offsets/1: cannot be read .*link") as error:
        read_checkpoint("yt:///cp", files=files)
    assert SECRET not in str(error.value)


def test_a_linked_cypress_offsets_folder_is_refused(cypress_job) -> None:
    files, location, private = cypress_job
    shutil.rmtree(location / "offsets")
    (private / "0").write_text((location / "commits" / "0").read_text())
    (location / "offsets").symlink_to(private)

    with pytest.raises(OSError, match="link"):
        read_checkpoint("yt:///cp", files=files)


@pytest.fixture
def after_call(standin) -> Iterator[list]:
    """The stand-in's hooks run after each command it serves (a hostile writer between two calls of the reader)."""
    hooks = standin.state.commands.after_call
    yield hooks
    hooks.clear()


def swap_once(hooks: list, looked_at: str, swap, look: int = 1) -> None:
    """Run `swap` once, right after the reader's `look`-th look at the node `looked_at` as itself
    (`...looked_at&/@...`)."""
    def hook(name: str, params: dict) -> None:
        path = str(params.get("path", ""))
        if name == "get" and "&/@" in path and path.partition("&/@")[0].endswith(looked_at):
            looks.append(path)
            if len(looks) == look:
                swap()

    looks: list[str] = []
    hooks.append(hook)


def test_a_cypress_batch_file_swapped_for_a_link_after_its_look_is_not_followed(cypress_job, after_call) -> None:
    files, location, private = cypress_job
    batch = location / "offsets" / "1"
    swap_once(after_call, "offsets/1", lambda: (batch.unlink(), batch.symlink_to(private / "secret")))

    with pytest.raises(CheckpointError, match=r"offsets/1: cannot be read") as error:
        read_checkpoint("yt:///cp", files=files)
    assert batch.is_symlink() and SECRET not in str(error.value)


def test_a_cypress_offsets_folder_swapped_for_a_link_after_its_look_is_not_followed(cypress_job, after_call) -> None:
    files, location, private = cypress_job
    (private / "1").write_text((location / "offsets" / "1").read_text())  # a batch file that would read well
    read_after_the_swap: list[str] = []

    def swap() -> None:
        shutil.rmtree(location / "offsets")
        (location / "offsets").symlink_to(private)
        after_call.append(lambda name, params: name == "read_file" and read_after_the_swap.append(params["path"]))

    swap_once(after_call, "offsets", swap, look=2)  # the reader listed offsets/ and looks at it again to read 1
    with pytest.raises((CheckpointError, OSError)):
        read_checkpoint("yt:///cp", files=files)
    assert (location / "offsets").is_symlink() and read_after_the_swap == []
