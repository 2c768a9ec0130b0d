"""No secret travels in clear (issue 32): `yt://` to another host is HTTPS unless the URI says `yt+http://`, and
credentials in a URI are refused naming the fix, without repeating them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opsd.config.load import ConfigError, load_config
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
