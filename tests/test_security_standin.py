"""The stand-in's Cypress paths stay inside its root (issue 32): `///abs/path`, `..` and a symlink out of the root
are refused by every command that reaches the disk (`get`, `list`, `exists`, `remove`, `create file`, `read_file`,
`write_file`, `set`, `lock`), through the real client."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yt.wrapper as yt_wrapper
from yt.common import YtError

from tests.support.standin import STANDIN_TOKEN
from ytsaurus_standin import StandinProxy

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(60)]


@pytest.fixture
def client(standin: StandinProxy) -> Iterator[yt_wrapper.YtClient]:
    yield yt_wrapper.YtClient(proxy=f"http://{standin.address}", token=STANDIN_TOKEN,
                              config={"proxy": {"retries": {"enable": False}}, "dynamic_table_retries":
                                      {"enable": False}})


@pytest.fixture
def outside(tmp_path: Path, standin: StandinProxy) -> Path:
    """A directory outside the stand-in's root, with a file, and a symlink to it inside the root."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_text("mode 0600 content")
    link = standin.root / f"link-{tmp_path.name}"
    link.symlink_to(tmp_path / "outside")
    yield tmp_path / "outside"
    link.unlink()


def escapes(outside: Path, standin: StandinProxy) -> list[str]:
    return [f"/{outside}", f"/{outside}/secret", "//../" + os.path.relpath(outside, standin.root.parent),
            f"//link-{outside.parent.name}/secret", f"//link-{outside.parent.name}"]


def run(client: yt_wrapper.YtClient, command: str, path: str) -> object:
    """One command on `path`; what a read returned."""
    if command == "create":
        return client.create("file", path + "/new", recursive=True)
    if command == "read_file":
        return client.read_file(path).read()
    if command == "write_file":
        return client.write_file(path + "/new", b"written")
    if command == "set":
        return client.set(path + "/@attr", "written")
    if command == "lock":
        with client.Transaction():
            return client.lock(path)
    return getattr(client, command)(path)


@pytest.mark.parametrize("command", ["get", "list", "exists", "remove", "create", "read_file", "write_file", "set",
                                     "lock"])
def test_no_command_reaches_past_the_root(client, standin: StandinProxy, outside: Path, command: str) -> None:
    seen = []
    for path in escapes(outside, standin):
        try:
            seen.append(run(client, command, path))
        except YtError as error:
            seen.append(str(error))
    assert (outside / "secret").read_text() == "mode 0600 content"
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]
    assert "mode 0600" not in str(seen)
    assert command not in ("get", "list", "exists") or all(s in (False, None) or isinstance(s, str) for s in seen), seen
