"""The layout's rules that import-linter cannot see: only apply steps and the CLI write to the cluster, and every
module says what concept lives in it. (The import layers themselves: import-linter, `lint-imports` in `make test`.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("opsd", "streaming_core")
#: Calls that change what the cluster holds: cluster / transaction methods, and the connector's own writers.
CLUSTER_WRITES = {"create_consumer", "register_queue_consumer", "unregister_queue_consumer", "insert_rows",
                  "delete_rows", "trim_rows", "write_table", "advance_consumer", "write_tuning"}
#: Generic names that are cluster writes when called on something named like a cluster.
CLUSTER_WRITES_ON_CLUSTER = {"create", "set", "remove"}


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def may_write(path: Path) -> bool:
    """The CLI, the demo (it prepares its own cluster) and the apply step of a check or a store."""
    parts = path.relative_to(ROOT).parts
    return parts[:2] in (("opsd", "cli"), ("opsd", "demo")) or (parts[:2] in (("opsd", "checks"), ("opsd", "stores"))
                                                                 and path.name == "apply.py")


def cluster_writes(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        receiver = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
        if name in CLUSTER_WRITES or (name in CLUSTER_WRITES_ON_CLUSTER and "cluster" in receiver.lower()):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(func)}")
    return found


def test_only_apply_steps_the_cli_and_the_demo_write_to_the_cluster() -> None:
    offending = [w for path in modules("opsd") if not may_write(path) for w in cluster_writes(path)]
    assert offending == []


def test_the_write_detector_sees_a_write() -> None:
    assert cluster_writes(ROOT / "opsd" / "cli" / "queue.py"), "the detector must find `opsd queue`'s writes"


@pytest.mark.parametrize("path", [p for package in PACKAGES for p in modules(package)],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_opens_with_a_docstring(path: Path) -> None:
    docstring = ast.get_docstring(ast.parse(path.read_text()))
    assert docstring and len(docstring.split()) >= 4, f"{path.relative_to(ROOT)}: say what concept lives here"
