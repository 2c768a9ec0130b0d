"""An optional bearer token guards `/metrics` and `/status` (issue 32): read from its file at every request (a
rotated Secret applies at once), compared in constant time; the kubelet's probes stay open."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from opsd.config.models import HttpSettings
from opsd.telemetry.http import BearerToken, OpsHttpServer

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(30)]


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("first-token-Xy7\n")
    return path


@pytest.fixture
def server(token_file: Path) -> Iterator[OpsHttpServer]:
    server = OpsHttpServer(lambda: b"opsd_up 1\n", status=lambda: {"queries": {"q": {"consumer": "//c"}}},
                           token=BearerToken(str(token_file)))
    server.start()
    yield server
    server.stop()


def get(server: OpsHttpServer, path: str, token: str | None = None) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return requests.get(server.url + path, headers=headers, timeout=10)


@pytest.mark.parametrize("path", ["/metrics", "/status"])
def test_without_the_token_nothing_is_told(server: OpsHttpServer, path: str) -> None:
    for token in (None, "wrong", "first-token-Xy", ""):
        answer = get(server, path, token)
        assert answer.status_code == 401 and "//c" not in answer.text and "opsd_up" not in answer.text
        assert answer.headers["WWW-Authenticate"] == 'Bearer realm="opsd"', "RFC 6750's challenge"
    allowed = get(server, path, "first-token-Xy7")
    assert allowed.status_code == 200 and "WWW-Authenticate" not in allowed.headers


def test_the_probes_stay_open(server: OpsHttpServer) -> None:
    assert (get(server, "/healthz").status_code, get(server, "/readyz").status_code) == (200, 200)


def test_a_rotated_token_applies_at_once_and_an_unreadable_file_lets_nobody_in(server: OpsHttpServer,
                                                                              token_file: Path) -> None:
    token_file.write_text("second-token-Qw3")
    assert get(server, "/status", "first-token-Xy7").status_code == 401
    assert get(server, "/status", "second-token-Qw3").status_code == 200
    token_file.unlink()
    assert get(server, "/status", "second-token-Qw3").status_code == 401


def test_the_config_names_the_file() -> None:
    assert HttpSettings(bearer_token_file="/var/run/secrets/opsd/token").bearer_token_file.endswith("token")


def test_opsd_status_sends_the_token_its_config_names_and_says_what_is_missing_without_it(
        server: OpsHttpServer, token_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from opsd.cli import main

    def config(token: str | None) -> str:
        path = tmp_path / "opsd.yaml"
        path.write_text(json.dumps({"http": {"port": server.port, "bearer_token_file": token}, "pipelines": [
            {"name": "p", "source": {"format": "rate"}, "sink": {"format": "console"}}]}))
        return str(path)

    assert main(["status", "--config", config(str(token_file)), "--json"]) == 0
    assert "//c" in capsys.readouterr().out
    assert main(["status", "--config", config(None)]) == 1
    err = capsys.readouterr().err
    assert "asks for the token of its http.bearer_token_file" in err and "--config" in err
