"""No secret travels in clear (issue 32): `yt://` to another host is HTTPS unless the URI says `yt+http://`, and
credentials in a URI are refused naming the fix, without repeating them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opsd.config.load import ConfigError, load_config
from opsd.telemetry.redaction import REDACTED, REFRESH_SECONDS, Redactor, known_secrets
from streaming_core.cluster import InvalidUriError, connect, resolve_uri, yt_proxy

pytestmark = [pytest.mark.hostile]

PASSWORD = "pa55-w0rd-Zq81"


@pytest.mark.parametrize(("uri", "proxy"), [
    ("yt://hahn.example.net", "https://hahn.example.net"),
    ("yt://10.0.0.7:80", "https://10.0.0.7:80"),
    ("yt+http://hahn.example.net", "http://hahn.example.net"),
    ("yt://127.0.0.1:8000", "127.0.0.1:8000"),
    ("yt://localhost:8000", "localhost:8000"),
    ("yt://[::1]:8000", "[::1]:8000"),
])
def test_a_token_crosses_plain_http_only_to_this_machine_or_where_the_uri_says_so(uri: str, proxy: str) -> None:
    assert yt_proxy(resolve_uri(uri))[0] == proxy
    assert connect(uri).proxy == proxy


@pytest.mark.parametrize("uri", [f"yt://robot:{PASSWORD}@hahn", f"yt+https://robot:{PASSWORD}@hahn:443",
                                 f"yt://{PASSWORD}@hahn"])
def test_credentials_in_a_uri_are_refused_naming_the_fix_not_the_password(uri: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidUriError) as error:
        resolve_uri(uri)
    assert "YT_TOKEN" in str(error.value) and PASSWORD not in str(error.value) and "@hahn" in str(error.value)

    path = tmp_path / "opsd.yaml"
    path.write_text(json.dumps({"cluster": uri, "pipelines": [
        {"name": "p", "source": {"format": "rate"}, "sink": {"format": "console"}}]}))
    with pytest.raises(ConfigError) as config_error:
        load_config(path)
    assert "YT_TOKEN" in str(config_error.value) and PASSWORD not in str(config_error.value)


# -- the redactor knows every token source the client reads, and follows rotation ------------------------------------

PATCH_TOKEN = "patch-token-Hq81Zx02"
CONFIG_TOKEN = "config-token-Lm55Pw19"
PATH_TOKEN = "token-path-file-Rt66Nv44"


@pytest.fixture
def client_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A token in each of YT_CONFIG_PATCHES, the config file (YT_CONFIG_PATH) and a token_path file it names."""
    (tmp_path / "token-file").write_text(PATH_TOKEN + "\n")
    config = tmp_path / "config"
    config.write_text(f'{{proxy={{url="hahn"}}; token="{CONFIG_TOKEN}"; token_path="{tmp_path / "token-file"}"}}')
    monkeypatch.setenv("YT_CONFIG_PATCHES", f'{{token="{PATCH_TOKEN}"}}')
    monkeypatch.setenv("YT_CONFIG_PATH", str(config))
    monkeypatch.delenv("YT_TOKEN", raising=False)
    monkeypatch.delenv("YT_TOKEN_PATH", raising=False)
    return tmp_path


def test_tokens_from_config_patches_the_config_file_and_its_token_path_are_masked(client_sources: Path) -> None:
    text = f"malformed patch near {PATCH_TOKEN[-9:]}... {PATCH_TOKEN} {CONFIG_TOKEN} {PATH_TOKEN}"
    masked = Redactor.from_environment().text(text)
    assert PATCH_TOKEN not in masked and CONFIG_TOKEN not in masked and PATH_TOKEN not in masked


def test_a_rotated_token_file_is_masked_after_the_refresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("first-token-Aa11Bb22")
    monkeypatch.setenv("YT_TOKEN_PATH", str(token_file))
    now = [0.0]
    redactor = Redactor(source=known_secrets, clock=lambda: now[0])
    token_file.write_text("rotated-token-Cc33Dd44")

    now[0] += REFRESH_SECONDS
    assert redactor.text("rotated-token-Cc33Dd44") == REDACTED
