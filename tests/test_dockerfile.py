"""The Dockerfile builds the image the chart names: the package and extras of pyproject.toml in a venv, `opsd`
as the entrypoint, the non-root user the chart's security context expects, and only volumes written to on a
read-only root filesystem. No container builder runs here, so the file is checked against the project and
scanned by checkov.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path, PurePosixPath

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from opsd.config.models import DEFAULT_PORT
from tests.support.checkov import checkov, needs_checkov

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CHART_DIR = ROOT / "helm" / "opsd"
VALUES = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
VENV = PurePosixPath("/opt/opsd/venv")
LOCK, BUILD_LOCK = ROOT / "requirements.lock", ROOT / "requirements-build.lock"


def locked(lock: Path) -> dict[str, tuple[str | None, list[str]]]:
    """name -> (pinned version, sha256 hashes) of every distribution of a pip-compile lock file."""
    text = re.sub(r"\\\n", " ", lock.read_text())
    pins = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement, *options = line.split(" --hash=")
        name, _, version = requirement.strip().partition("==")
        pins[canonicalize_name(name)] = (version or None, [h for h in options if h.startswith("sha256:")])
    return pins


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of every line of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(
        line for line in DOCKERFILE.read_text().splitlines() if not line.lstrip().startswith("#")))
    parts = [line.split(None, 1) for line in text.splitlines() if line.strip()]
    return [(instruction.upper(), args.strip()) for instruction, args in parts]


def stages() -> list[list[tuple[str, str]]]:
    """The instructions per build stage, each stage starting at its FROM."""
    result: list[list[tuple[str, str]]] = []
    for instruction in instructions():
        if instruction[0] == "FROM":
            result.append([])
        result[-1].append(instruction)
    return result


def final(name: str) -> list[str]:
    """The arguments of every ``name`` instruction of the final stage."""
    return [args for instruction, args in stages()[-1] if instruction == name]


def exec_form(args: str) -> list[str]:
    return json.loads(args)


def env() -> dict[str, str]:
    """The final stage's environment (ENV KEY=VALUE ...)."""
    pairs = [item.split("=", 1) for args in final("ENV") for item in shlex.split(args)]
    return dict(pairs)


def volumes() -> list[PurePosixPath]:
    return [PurePosixPath(path) for args in final("VOLUME") for path in exec_form(args)]


def under(path: str | PurePosixPath, roots: list[PurePosixPath]) -> bool:
    return any(PurePosixPath(path).is_relative_to(root) for root in roots)


def chart_writable_mounts() -> list[PurePosixPath]:
    """The mount paths of the chart's Deployment that are not read-only (read from the template)."""
    template = (CHART_DIR / "templates" / "deployment.yaml").read_text()
    mounts = re.findall(r"- name: \w+\n\s+mountPath: (\S+)(\n\s+readOnly: true)?", template)
    return [PurePosixPath(path) for path, read_only in mounts if not read_only]


def test_it_has_a_build_stage_and_a_runtime_stage_on_the_same_pinned_python_base():
    froms = [args for instruction, args in instructions() if instruction == "FROM"]
    assert len(froms) == 2
    images = [args.split()[0] for args in froms]
    # A full version tag, optionally with the digest that pins it (the Dockerfile's header says how to find it).
    assert images[0] == images[1] and re.fullmatch(r"python:3\.11\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", images[0])
    assert PYPROJECT["project"]["requires-python"].startswith(">=3.11")


def test_it_copies_every_package_pyproject_toml_installs_and_its_script_files():
    copied = {PurePosixPath(source) for _, args in stages()[0] if _ == "COPY" for source in args.split()[:-1]}
    setuptools = PYPROJECT["tool"]["setuptools"]
    packages = {PurePosixPath(name.rstrip("*")) for name in setuptools["packages"]["find"]["include"]}
    scripts = {PurePosixPath(path).parent for path in setuptools["script-files"]}
    metadata = {PurePosixPath("pyproject.toml"), PurePosixPath(PYPROJECT["project"]["readme"])}
    assert metadata | packages | scripts <= copied


def pip_installs() -> list[list[str]]:
    """The arguments of every `pip install` of the build stage."""
    runs = " && ".join(args for instruction, args in stages()[0] if instruction == "RUN")
    return [shlex.split(part)[2:] for part in re.split(r"\s*&&\s*", runs) if part.startswith(f"{VENV}/bin/pip install")]


@pytest.mark.hostile
def test_every_dependency_is_installed_from_a_lock_with_hashes_and_the_package_without_any():
    installs = pip_installs()
    assert [args for args in installs if "-r" in args] == [
        ["--require-hashes", "-r", BUILD_LOCK.name], ["--require-hashes", "--no-build-isolation", "-r", LOCK.name]]
    [package] = [args for args in installs if "-r" not in args]
    assert package == ["--no-deps", "--no-index", "--no-build-isolation", "."]
    assert f"--from=build {VENV} {VENV}" in final("COPY")


@pytest.mark.hostile
def test_the_locks_pin_every_distribution_with_its_hashes():
    for lock in (LOCK, BUILD_LOCK):
        pins = locked(lock)
        assert pins, lock
        assert [name for name, (version, hashes) in pins.items() if not (version and hashes)] == []


def test_the_lock_satisfies_every_runtime_dependency_and_the_spyt_extra():
    pins = {name: Version(version) for name, (version, _) in locked(LOCK).items()}
    wanted = [Requirement(r) for r in [*PYPROJECT["project"]["dependencies"],
                                        *PYPROJECT["project"]["optional-dependencies"]["spyt"]]]
    assert [str(r) for r in wanted if pins.get(canonicalize_name(r.name)) not in r.specifier] == []
    build = {name: Version(version) for name, (version, _) in locked(BUILD_LOCK).items()}
    for requirement in map(Requirement, PYPROJECT["build-system"]["requires"]):
        assert build.get(canonicalize_name(requirement.name)) in requirement.specifier


def test_the_runtime_has_java_17_and_the_venv_first_on_path():
    assert "openjdk-17-jre-headless" in " ".join(final("RUN"))
    assert env()["PATH"].startswith(f"{VENV}/bin:")


def test_executors_start_the_venvs_python_through_the_packaged_wrapper():
    wrapper = PurePosixPath(PYPROJECT["tool"]["setuptools"]["script-files"][0]).name
    assert env()["PYSPARK_PYTHON"] == f"{VENV}/bin/{wrapper}"


def test_the_entrypoint_is_opsd_and_the_command_is_the_charts():
    assert "opsd" in PYPROJECT["project"]["scripts"]
    assert [exec_form(args) for args in final("ENTRYPOINT")] == [["opsd"]]
    template = (CHART_DIR / "templates" / "deployment.yaml").read_text()
    assert 'command: ["opsd"]' in template
    assert f"args: {json.dumps(exec_form(final('CMD')[0]))}" in template


def test_it_runs_as_the_non_root_user_the_charts_security_context_names():
    (user,) = final("USER")
    uid, gid = (int(part) for part in user.split(":"))
    assert uid != 0 and gid != 0
    assert (uid, gid) == (VALUES["podSecurityContext"]["runAsUser"], VALUES["podSecurityContext"]["runAsGroup"])
    assert VALUES["podSecurityContext"]["runAsNonRoot"] is True


def test_with_a_read_only_root_only_volumes_are_written_and_the_chart_mounts_each_writable():
    assert VALUES["securityContext"]["readOnlyRootFilesystem"] is True
    declared = volumes()
    written = [env()["HOME"], env()["SPARK_LOCAL_DIRS"], VALUES["config"]["cluster"].removeprefix("local://")]
    assert [path for path in written if not under(path, declared)] == []
    assert PurePosixPath("/tmp") in declared
    mounts = chart_writable_mounts()
    assert [path for path in declared if not under(path, mounts)] == []


def test_the_image_and_the_chart_agree_on_the_name_and_port():
    assert VALUES["config"]["http"]["port"] == DEFAULT_PORT  # one default port: opsd's, the CLI's, the chart's
    assert VALUES["image"]["repository"] == PYPROJECT["project"]["name"]
    assert yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())["appVersion"] == PYPROJECT["project"]["version"]
    assert final("EXPOSE") == [str(VALUES["config"]["http"]["port"])]
    assert f"127.0.0.1:{VALUES['config']['http']['port']}/healthz" in final("HEALTHCHECK")[0]


def test_the_build_context_holds_only_what_the_dockerfile_copies():
    ignore = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    assert ignore[0] == "*"
    included = {line.removeprefix("!").rstrip("/") for line in ignore if line.startswith("!")}
    copied = {source for _, args in stages()[0] if _ == "COPY" for source in args.split()[:-1]}
    assert copied == included


@needs_checkov
def test_checkov_finds_nothing_in_the_dockerfile():
    failed, skipped = checkov(DOCKERFILE, "dockerfile")
    assert failed == []
    assert skipped == []


def test_checkov_is_in_the_dev_extra():
    assert any(req.startswith("checkov") for req in PYPROJECT["project"]["optional-dependencies"]["dev"])
