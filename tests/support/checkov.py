"""checkov, the infrastructure-as-code scanner (PyPI `checkov`), run as a subprocess on files or directories.

Its failed checks come back as readable lines (check id, resource, file) for the assertion message; checks
skipped in the scanned files (`checkov:skip=<ID>:<reason>`) are returned apart so tests can demand a reason.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

CHECKOV = shutil.which("checkov") or str(Path(sys.executable).with_name("checkov"))



def needs_checkov(test: Callable[..., None]) -> Callable[..., None]:
    """Marks a test that runs checkov: `checkov`, and skipped where it is not installed."""
    missing = not Path(CHECKOV).exists()
    return pytest.mark.checkov(pytest.mark.skipif(missing, reason="checkov not installed (the dev extra has it)")(test))


def checkov(target: Path, framework: str) -> tuple[list[str], list[dict]]:
    """Scan ``target`` (a file or a directory) with one checkov framework: (failed checks, skipped checks)."""
    option = "--directory" if target.is_dir() else "--file"
    result = subprocess.run(
        [CHECKOV, option, str(target), "--framework", framework, "--output", "json", "--skip-download"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    if not result.stdout.strip():  # nothing scanned, or checkov itself failed
        raise AssertionError(f"checkov printed nothing (exit {result.returncode}): {result.stderr[-2000:]}")
    reports = json.loads(result.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    failed, skipped = [], []
    for report in reports:
        if "results" not in report:  # a framework with nothing to check reports only its summary
            continue
        failed += [f"{c['check_id']} {c['check_name']!r} on {c['resource']} in {c['file_path']}"
                   for c in report["results"].get("failed_checks", [])]
        skipped += report["results"].get("skipped_checks", [])
    return failed, skipped
