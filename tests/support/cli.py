"""What the CLI tests share: an embedded cluster per test and `opsd` run in-process against it."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from opsd.cli import main
from streaming_core.cluster import Cluster, connect

#: `opsd(*args, stdin=None) -> (exit code, stdout, stderr)`, run in-process.
Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def uri(tmp_path: Path) -> str:
    return f"local://{tmp_path / 'cluster'}"


@pytest.fixture
def cluster(uri: str) -> Cluster:
    return connect(uri)


@pytest.fixture
def opsd(uri: str, capsys: pytest.CaptureFixture[str]) -> Run:
    """Run `opsd ARGS --cluster URI` in-process; returns (exit code, stdout, stderr)."""
    def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
        if stdin is not None:
            sys.stdin = io.StringIO(stdin)
        try:
            code = main([*args, "--cluster", uri])
        finally:
            sys.stdin = sys.__stdin__
        out, err = capsys.readouterr()
        return code, out, err
    return run


def assert_fails(result: tuple[int, str, str], *fragments: str) -> None:
    code, _, err = result
    assert code != 0
    assert err.startswith("opsd: error: ") and "Traceback" not in err
    for fragment in fragments:
        assert fragment in err
