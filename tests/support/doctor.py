"""Running `opsd doctor` in-process and following its advice: the doctor's report, a finding by kind, the `opsd`
commands an advice names, each run as written, and a config naming one pipeline of a queue and checkpoint."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from opsd.cli.main import main


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict | str]:
    """`opsd doctor ARGS`: (exit code, the JSON report with `--json`, else the text printed); what was printed
    before (a Spark query's log lines) is dropped first."""
    capsys.readouterr()
    code = main(["doctor", *args])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if "--json" in args and code != 2 else out.out + out.err)


def findings(report: dict, query: str) -> list[dict[str, Any]]:
    return report["queries"][query]["findings"]


def finding(report: dict, query: str, kind: str) -> dict[str, Any]:
    """The one finding of `kind` for `query` (fails when there is none or several)."""
    [found] = [f for f in findings(report, query) if f["kind"] == kind]
    return found


def advised_commands(advice: str) -> list[list[str]]:
    """The `opsd ...` commands an advice names, in order, as argument lists (each within `(opsd ...)`, up to a `;`
    or the closing parenthesis)."""
    return [shlex.split(command) for command in re.findall(r"\(opsd ([^;)]*)", advice)]


def follow(capsys: pytest.CaptureFixture[str], command: list[str], cluster_uri: str | None = None
           ) -> tuple[int, str, str]:
    """Run an advised command as written (`--cluster` added when it names none and `cluster_uri` is given): (exit
    code, stdout, stderr) of the command alone (what was printed before is dropped first)."""
    capsys.readouterr()
    extra = ["--cluster", cluster_uri] if cluster_uri and "--cluster" not in command else []
    code = main([*command, *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def write_config(path: Path, cluster_uri: str, queue: str, consumer: str, checkpoint: str, *,
                 name: str = "run") -> Path:
    """An opsd config of one pipeline reading `queue` with `consumer` into the console, resuming at `checkpoint`:
    what `opsd doctor --config` and `opsd run --check` read (no Spark: the console sink needs no schema fit)."""
    path.write_text(json.dumps({
        "cluster": cluster_uri,
        "pipelines": [{"name": name, "source": {"path": queue, "options": {"consumer_path": consumer}},
                       "sink": {"format": "console"}, "checkpoint_location": checkpoint}]}))
    return path
