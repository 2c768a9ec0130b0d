"""The version is written once, in pyproject.toml: both packages read it from the installed distribution's metadata."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import opsd
import streaming_core

ROOT = Path(__file__).resolve().parent.parent
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_both_packages_report_pyprojects_version() -> None:
    assert streaming_core.__version__ == opsd.__version__ == VERSION


def test_no_module_writes_the_version_again() -> None:
    written = [str(path.relative_to(ROOT)) for top in ("opsd", "streaming_core") for path in (ROOT / top).rglob("*.py")
               if any(isinstance(node, ast.Constant) and node.value == VERSION
                      for node in ast.walk(ast.parse(path.read_text())))]
    assert written == []
