"""The test suite's own rules: a test module imports helpers from `tests.support` only (never another test module,
never `conftest`), each shared helper is defined once there, and every test that starts Spark or an external program
is marked so that `make test-fast` leaves it out (`tests.support.programs`)."""

from __future__ import annotations

import ast
import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.programs import PROGRAM_MARKERS, PROGRAMS, ProgramLog, real_programs, unmarked, write_shims

TESTS = Path(__file__).resolve().parent
SUPPORT = TESTS / "support"
#: Every Python file of the suite: test modules, `conftest`, support modules and child-process scripts.
SUITE = sorted(TESTS.rglob("*.py"))
OUTSIDE_SUPPORT = [p for p in SUITE if SUPPORT not in p.parents]
#: Modules of the suite a test may import: its support package (the scripts run as child processes).
HELPER_PACKAGE = "tests.support"


def rel(path: Path) -> str:
    return str(path.relative_to(TESTS.parent))


@functools.cache
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def imported_modules(path: Path, source: str | None = None) -> list[str]:
    """Every module `path` (or `source`, read as if it were at `path`) imports, relative imports made absolute."""
    package = path.relative_to(TESTS.parent).parent.parts
    modules = []
    for node in ast.walk(parsed(path) if source is None else ast.parse(source)):
        if isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1]
            modules.append(".".join((*base, *([node.module] if node.module else []))))
        elif isinstance(node, ast.ImportFrom):
            modules.append(node.module or "")
    return modules


def suite_import(module: str) -> bool:
    """A module of the suite itself, by any name it can be reached by (`tests.x`, or `x` from `tests/`)."""
    top = module.split(".")[0]
    return top == "tests" or (TESTS / f"{top}.py").exists() or (TESTS / top / "__init__.py").exists()


@pytest.mark.parametrize("path", SUITE, ids=rel)
def test_the_suite_imports_only_its_support_package(path: Path) -> None:
    wrong = [m for m in imported_modules(path)
             if suite_import(m) and not (m == HELPER_PACKAGE or m.startswith(f"{HELPER_PACKAGE}."))]
    assert wrong == [], f"{rel(path)} imports {wrong}: shared helpers and fixtures belong in tests/support/"


def test_the_import_check_sees_a_test_module_conftest_and_a_relative_import() -> None:
    module = TESTS / "test_example.py"
    assert not suite_import("pytest") and not suite_import("opsd.cli")
    assert all(suite_import(m) for m in ("conftest", "tests.conftest", "test_opsd_http", "tests.test_lag"))
    assert imported_modules(module, "from .conftest import x\nimport test_lag") == ["tests.conftest", "test_lag"]
    assert imported_modules(module, "from .support.wait import wait_until") == ["tests.support.wait"]
    assert imported_modules(SUPPORT / "x.py", "from .. import conftest") == ["tests"]


@functools.cache
def functions(path: Path) -> dict[str, str]:
    """Each top-level function of `path`: name -> its body without docstring, as text (annotations left out)."""
    found = {}
    for node in parsed(path).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            found[node.name] = "\n".join(ast.unparse(statement) for statement in body)
    return found


#: Helpers that used to be written again in test modules: only `tests.support` defines them.
SHARED_HELPERS = {"free_port", "closed_port", "taken_port", "wait_until", "wait_for", "make_queue", "read_queue"}


@pytest.mark.parametrize("path", OUTSIDE_SUPPORT, ids=rel)
def test_no_module_outside_support_defines_a_shared_helper_or_a_twin_of_one(path: Path) -> None:
    support_bodies = {body: f"{p.stem}.{name}" for p in SUPPORT.glob("*.py") for name, body in functions(p).items()}
    own = functions(path)
    assert sorted(SHARED_HELPERS & own.keys()) == [], f"{rel(path)}: import these from tests.support"
    twins = {name: support_bodies[body] for name, body in own.items() if body in support_bodies}
    assert twins == {}, f"{rel(path)} copies helpers of tests.support: import them instead"


def test_the_twin_check_sees_a_copy_under_another_name(tmp_path: Path) -> None:
    copy = tmp_path / "test_copy.py"
    copy.write_text(SUPPORT.joinpath("ports.py").read_text().replace("def free_port", "def any_port"))
    support_bodies = set(functions(SUPPORT / "ports.py").values())
    assert functions(copy)["any_port"] in support_bodies


def calls_bind_to_any_port(path: Path) -> list[int]:
    """Lines that bind a socket to port 0 (an ephemeral port): what `tests.support.ports` is for."""
    return [node.lineno for node in ast.walk(parsed(path))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "bind"
            and node.args and isinstance(node.args[0], ast.Tuple) and len(node.args[0].elts) == 2
            and isinstance(node.args[0].elts[1], ast.Constant) and node.args[0].elts[1].value == 0]


def polling_deadlines(path: Path) -> list[int]:
    """Lines that compute a deadline from `time.monotonic()` in a loop of their own: what `wait_until` is for."""
    return [node.lineno for node in ast.walk(parsed(path))
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)
            and "time.monotonic()" in ast.unparse(node.left)]


@pytest.mark.parametrize("path", OUTSIDE_SUPPORT, ids=rel)
def test_ports_and_polling_loops_come_from_support(path: Path) -> None:
    assert calls_bind_to_any_port(path) == [], f"{rel(path)}: use tests.support.ports (free_port, taken_port)"
    assert polling_deadlines(path) == [], f"{rel(path)}: use tests.support.wait.wait_until"


def test_the_helper_checks_see_a_port_and_a_deadline() -> None:
    assert calls_bind_to_any_port(SUPPORT / "ports.py")
    assert polling_deadlines(SUPPORT / "wait.py")


def test_a_shim_notes_its_program_and_runs_the_real_one(tmp_path: Path) -> None:
    log = tmp_path / "started.log"
    write_shims(tmp_path, log, {"tmux": "/bin/echo"})
    reader = ProgramLog(log)

    done = subprocess.run([tmp_path / "bin" / "tmux", "a b", "c"], capture_output=True, text=True, check=True,
                          env={**os.environ, "PATH": "/nonexistent"})
    assert done.stdout == "a b c\n"
    assert reader.started_since_last_read() == ["tmux"]
    assert reader.started_since_last_read() == []


def test_a_program_is_allowed_only_by_its_marker() -> None:
    assert unmarked(["java", "tmux", "java"], {"spark"}) == ["tmux (needs @pytest.mark.tmux)"]
    assert unmarked(["promtool", "prometheus-alertmanager"], {"prometheus"}) == []
    assert unmarked([], set()) == []


def test_java_comes_from_java_home_when_it_is_set(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "java").touch()
    java = str(tmp_path / "bin" / "java")
    assert real_programs({"PATH": "/nonexistent", "JAVA_HOME": str(tmp_path)}) == {"java": java}
    assert real_programs({"PATH": "/nonexistent"}) == {}


def test_every_program_marker_is_registered(pytestconfig: pytest.Config) -> None:
    registered = {line.split(":")[0] for line in pytestconfig.getini("markers")}
    assert set(PROGRAM_MARKERS.values()) <= registered


def test_this_run_starts_java_through_its_shim() -> None:
    java = shutil.which("java")
    if java is None:
        pytest.skip("no java here")
    assert Path(java).parent == PROGRAMS.path.parent / "bin"


def test_a_test_that_starts_java_unmarked_errors_naming_the_marker_it_lacks(tmp_path: Path) -> None:
    if shutil.which("java") is None:
        pytest.skip("no java here")
    starts_java = "subprocess.run(['java', '-version'], capture_output=True, check=True)"
    (tmp_path / "test_java.py").write_text(
        f"import subprocess\nimport pytest\n\n\ndef test_unmarked():\n    {starts_java}\n\n\n"
        f"@pytest.mark.spark\ndef test_marked():\n    {starts_java}\n")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "tests.support.programs", "-p", "no:cacheprovider",
               "-W", "ignore::pytest.PytestUnknownMarkWarning", "--rootdir", str(tmp_path), str(tmp_path)]
    # Without this run's shims (`PATH`, `JAVA_HOME`): the java the inner run starts is its own test's, not this one's.
    shims = str(PROGRAMS.path.parent / "bin")
    env = {key: value for key, value in os.environ.items() if key != "JAVA_HOME"}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != shims)
    done = subprocess.run(command, cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert "2 passed, 1 error" in done.stdout, done.stdout[-3000:]
    assert "test_java.py::test_unmarked started java (needs @pytest.mark.spark)" in done.stdout
