"""What `opsd` tells a person outside the happy path: help with defaults and the config keys, errors that name the
cluster searched or the port taken (before Spark starts) and the option to change, and a quiet Ctrl-C."""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from opsd.cli import main
from opsd.cli.main import INTERRUPTED, build_parser
from opsd.config.models import OpsdConfig
from opsd.config.reference import MARKDOWN_PATH, config_reference
from tests.support.daemon import opsd
from tests.support.ports import taken_port


def help_of(*command: str) -> str:
    result = opsd(*command, "--help")
    assert result.returncode == 0, result.stderr
    return result.stdout


def parsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield parser.prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from parsers(child)


def leaf_keys(model: type[BaseModel]) -> Iterator[str]:
    for name, field in model.model_fields.items():
        nested = [a for a in (field.annotation, *getattr(field.annotation, "__args__", ()))
                  if isinstance(a, type) and issubclass(a, BaseModel)]
        yield from (leaf_keys(nested[0]) if nested else [name])


@pytest.mark.parametrize(("command", "default"), [
    (("status",), "(default: http://127.0.0.1:9108)"),
    (("demo",), "(default: 9108)"),
    (("demo",), "(default: .opsd/demo)"),
    (("queue", "produce"), "as fast as possible (default: 0)"),
])
def test_help_shows_the_defaults(command: tuple[str, ...], default: str) -> None:
    assert default in help_of(*command)


def test_every_argument_of_every_command_has_help() -> None:
    missing = [f"{prog} {action.dest}" for prog, parser in parsers(build_parser()) for action in parser._actions
               if not action.help and not isinstance(action, argparse._SubParsersAction)]
    assert missing == []


def test_run_help_lists_every_config_key_with_its_default() -> None:
    text = help_of("run")

    assert "The config file (YAML), key by key with defaults:" in text
    assert f"With types, as one table: {MARKDOWN_PATH}" in text
    assert "port = 9108: port to bind" in text
    assert "format = auto: json: one JSON object per line" in text
    reference = config_reference()
    assert [key for key in leaf_keys(OpsdConfig)
            if not re.search(rf"^ *{key}( = [^:]+| \(required\))?: \S", reference, re.M)] == []


def test_unknown_path_on_the_default_cluster_says_which_root_and_how_to_choose(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for variable in ("OPSD_CLUSTER", "YT_PROXY", "OPSD_CLUSTER_ROOT"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["queue", "create", "//home/other"]) == 0
    capsys.readouterr()

    assert main(["queue", "inspect", "//home/missing"]) == 1
    assert capsys.readouterr().err == (
        f"opsd: error: //home/missing: no such node (searched cluster local://{tmp_path / '.opsd/cluster'} "
        "(the default; choose another with --cluster or $OPSD_CLUSTER))\n")


def test_unknown_path_on_the_environments_cluster_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OPSD_CLUSTER", f"local://{tmp_path}")
    assert main(["queue", "create", "//home/other"]) == 0

    assert main(["queue", "inspect", "//home/missing"]) == 1
    assert f"(searched cluster local://{tmp_path} (from $OPSD_CLUSTER))" in capsys.readouterr().err


def test_ctrl_c_exits_130_without_a_message(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr("opsd.cli.status.status_command", interrupted)

    assert main(["status"]) == INTERRUPTED == 130
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("command", ["run", "demo"])
def test_a_taken_port_is_named_with_the_option_to_change_before_spark_starts(command: str, tmp_path: Path) -> None:
    with taken_port() as port:
        config = tmp_path / "opsd.yaml"
        config.write_text(f"http: {{port: {port}}}\n"
                          "pipelines: [{name: p, source: {format: rate}, sink: {format: console}}]\n")
        args = {"run": ["run", str(config)],
                "demo": ["demo", "--port", str(port), "--root", str(tmp_path / "demo")]}[command]
        option = {"run": f"set http.port in {config}", "demo": "choose another with --port"}[command]

        started = time.monotonic()
        result = opsd(*args, timeout=120)

    assert result.returncode == 1
    assert result.stderr.endswith(f"opsd: error: port {port} on 127.0.0.1 is already in use: {option} "
                                  "(0 = any free port)\n"), result.stderr
    assert "incubator" not in result.stderr + result.stdout, "the JVM was started"
    assert time.monotonic() - started < 60
