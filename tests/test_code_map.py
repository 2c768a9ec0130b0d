"""The code map (`docs/code-map.md`) lists every module of `streaming_core/`, `opsd/`, `bench/`, `grafana/` and
`ytsaurus_standin/`, and names no module that does not exist. Fast: reads files only.

Each row of the map's table names its folders in the first column (`opsd/cli/`) and, in the second, the modules that
live there in backticks: by name (`queue`), by file (`base.py`), or below a subpackage (`wire/decimal`). A subpackage
of the row's folder that the row names (`lag`) may list its modules by name alone (`collect`): a check's steps are
named once for all checks. A module is listed in the row of its nearest folder that has one.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAPPED = ("streaming_core", "opsd", "bench", "grafana", "ytsaurus_standin")
#: Names in backticks in the second column that look like modules and are not (a format, calls, an argument, knobs).
NOT_MODULES = {"yt", "insert_rows", "select_rows", "mode", "max_rows_per_partition", "dyn_batch_size"}
_TOKEN = re.compile(r"`([^`]+)`")
# What a module is named by: `queue`, `base.py`, `wire/`, `wire/decimal` (a command, a dotted name, a file of another
# kind is not).
_MODULE_LIKE = re.compile(r"^_*[a-z][a-z0-9_]*(/[a-z_][a-z0-9_]*)*(\.py|/)?$")


def code_map(page: str) -> dict[str, set[str]]:
    """Folder (`opsd/cli`) -> the names in backticks in the second column of its row."""
    section = page.split("# Code map\n", 1)[1]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        for folder in _TOKEN.findall(cells[0]):
            rows.setdefault(folder.rstrip("/"), set()).update(_TOKEN.findall(cells[1]))
    return rows


def modules() -> list[str]:
    """Every module under the mapped folders, as a path without `.py` (packages' `__init__` are their folders)."""
    return sorted(str(p.relative_to(ROOT).with_suffix("")) for top in MAPPED for p in (ROOT / top).rglob("*.py")
                  if p.name != "__init__.py")


def row_of(module: str, rows: dict[str, set[str]]) -> str | None:
    folders = [f for f in rows if module.startswith(f + "/")]
    return max(folders, key=len) if folders else None


def listed(module: str, folder: str, names: set[str]) -> bool:
    relative = module[len(folder) + 1:]
    *packages, name = relative.split("/")
    spelled = {relative, relative + ".py"}
    if packages and all(p in names or p + "/" in names for p in packages):
        spelled |= {name, name + ".py"}
    return bool(spelled & names) or (not packages and name in names)


def unlisted(rows: dict[str, set[str]]) -> list[str]:
    return [m for m in modules() if (folder := row_of(m, rows)) is None or not listed(m, folder, rows[folder])]


def missing(rows: dict[str, set[str]]) -> list[str]:
    """Names in a row that are neither a module nor a package under its folder, nor a module of a package it names."""
    found = []
    for folder, names in rows.items():
        if not folder.startswith(MAPPED):
            continue
        for name in sorted(n for n in names - NOT_MODULES if _MODULE_LIKE.match(n)):
            path = ROOT / folder / name.removesuffix(".py").rstrip("/")
            in_package = any(
                (ROOT / folder / package.rstrip("/") / f"{name.removesuffix('.py')}.py").exists()
                for package in names if (ROOT / folder / package.rstrip("/")).is_dir())
            if not (path.with_suffix(".py").exists() or path.is_dir() or in_package):
                found.append(f"{folder}: {name}")
    return found


README_ROWS = code_map((ROOT / "docs" / "code-map.md").read_text())


def test_every_module_is_in_the_code_map() -> None:
    assert unlisted(README_ROWS) == []


def test_the_code_map_names_no_module_that_does_not_exist() -> None:
    assert missing(README_ROWS) == []


def test_a_module_left_out_or_gone_is_seen() -> None:
    rows = {folder: set(names) for folder, names in README_ROWS.items()}
    rows["opsd/cli"].discard("queue")
    rows["opsd/observe"].add("gone")
    assert "opsd/cli/queue" in unlisted(rows)
    assert "opsd/observe: gone" in missing(rows)
