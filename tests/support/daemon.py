"""`opsd` as a child process for tests: the command, `run_daemon`, `http_status`, and their time limits."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

OPSD = [sys.executable, "-m", "opsd.cli"]
START_SECONDS = 240.0
WAIT_SECONDS = 120.0


def opsd(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*OPSD, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "200"})


def run_daemon(config_file: Path, stderr: Path, env: Mapping[str, str] | None = None,
               options: Sequence[str] = ()) -> subprocess.Popen[bytes]:
    """`opsd run [OPTIONS] CONFIG` in a child process (with `env`, else this one's), its log lines (stderr) going to
    `stderr`."""
    with stderr.open("wb") as err:
        return subprocess.Popen([*OPSD, "run", *options, str(config_file)], stdout=subprocess.DEVNULL, stderr=err,
                                env=env)


def rows(first: int, count: int) -> list[dict[str, Any]]:
    return [{"data": f"row-{i}", "n": i} for i in range(first, first + count)]


def http_status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None
