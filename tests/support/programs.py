"""The external programs tests start, and the marker each asks for: a test that starts one must carry its marker, so
that `make test-fast` (`-m "not spark and not prometheus and ..."`) never starts Spark or an external server.

Loaded first by `conftest.py`, before any module looks a program up: it puts a directory of shims in front of `PATH`
(and `JAVA_HOME`, which Spark's launch scripts prefer), each of which notes its program's name in a log, then runs
the real program. After each test's teardown, the programs noted since the previous test must all be allowed by the
test's markers (`PROGRAM_MARKERS`); otherwise the test errors, naming the program and the marker it lacks.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

#: Program -> the marker of a test that starts it. `java` is Spark's JVM, in the test's process or a child's.
PROGRAM_MARKERS: Mapping[str, str] = {
    "java": "spark",
    "prometheus": "prometheus",
    "promtool": "prometheus",
    "prometheus-alertmanager": "prometheus",
    "tmux": "tmux",
    "checkov": "checkov",
}


class ProgramLog:
    """The log the shims append to, read in order: each read returns what was started since the previous one."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._read = 0

    def started_since_last_read(self) -> list[str]:
        with self.path.open() as log:
            log.seek(self._read)
            names = log.read()
            self._read = log.tell()
        return names.split()


def write_shims(directory: Path, log: Path, real: Mapping[str, str]) -> None:
    """`directory/bin/NAME` for each program in `real` (name -> the real program's path)."""
    (directory / "bin").mkdir(parents=True, exist_ok=True)
    log.touch()
    for name, program in real.items():
        shim = directory / "bin" / name
        shim.write_text(f"#!/bin/sh\nprintf '%s\\n' {shlex.quote(name)} >> {shlex.quote(str(log))}\n"
                        f"exec {shlex.quote(program)} \"$@\"\n")
        shim.chmod(0o755)


def real_programs(environ: Mapping[str, str]) -> dict[str, str]:
    """Each program of `PROGRAM_MARKERS` installed here: `java` from `$JAVA_HOME` when set, the others from `PATH`
    (a program missing here gets no shim, so tests still see it missing)."""
    found = {name: shutil.which(name, path=environ.get("PATH")) for name in PROGRAM_MARKERS}
    java_home = environ.get("JAVA_HOME")
    if java_home and Path(java_home, "bin", "java").exists():
        found["java"] = str(Path(java_home, "bin", "java"))
    return {name: path for name, path in found.items() if path}


def unmarked(started: list[str], markers: set[str]) -> list[str]:
    """The programs in `started` that a test with `markers` may not start, each once, with the marker it needs."""
    return [f"{name} (needs @pytest.mark.{PROGRAM_MARKERS[name]})"
            for name in dict.fromkeys(started) if PROGRAM_MARKERS[name] not in markers]


def _install() -> ProgramLog:
    root = Path(tempfile.mkdtemp(prefix="opsd-tests-programs-"))
    log = root / "started.log"
    write_shims(root, log, real_programs(os.environ))
    os.environ["PATH"] = f"{root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    if os.environ.get("JAVA_HOME"):
        os.environ["JAVA_HOME"] = str(root)
    return ProgramLog(log)


PROGRAMS = _install()


def pytest_unconfigure() -> None:
    shutil.rmtree(PROGRAMS.path.parent, ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    try:
        yield
    finally:  # read even when the teardown failed, so that the next test is judged by its own programs only
        started = unmarked(PROGRAMS.started_since_last_read(), {mark.name for mark in item.iter_markers()})
    if started:
        pytest.fail(f"{item.nodeid} started {', '.join(started)}", pytrace=False)
