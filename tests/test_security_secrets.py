"""No secret travels in clear (issue 32): `yt://` to another host is HTTPS unless the URI says `yt+http://`, and
credentials in a URI are refused naming the fix, without repeating them."""

from __future__ import annotations

import json
from collections.abc import Callable
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


# -- the spark.conf and option check reads values too --------------------------------------------------------------

YANDEX_TOKEN = "AQAD-qJSJxRk2m8aZp04Vb7nLw3cYt9Ue"
TOKEN_VALUES = {
    "config-patches": ("spark.executorEnv.YT_CONFIG_PATCHES", f'{{proxy={{url="hahn"}}; token="{PASSWORD}"}}'),
    "json-patches": ("spark.executorEnv.YT_CONFIG_PATCHES", f'{{"token": "{PASSWORD}"}}'),
    "jvm-option": ("spark.driver.extraJavaOptions", f"-Xmx1g -Djavax.net.ssl.trustStorePassword={PASSWORD}"),
    "oauth-legacy": ("spark.executorEnv.MY_CLIENT", YANDEX_TOKEN),
    "oauth-y0": ("spark.hadoop.fs.yt.auth", "y0_AgAAAABkZmZ2AAtHbAAAAAEKcW1xAADr5zQX8t3hQ"),
    "issue-token": ("spark.executorEnv.CREDS_OF_ROBOT", "2c5956daecdff8dd45d2561a8679acf5"),
    "base64": ("spark.executorEnv.SESSION", "k3J9fQ2xLmZ8vB7wYt4Rn1Hs6Pd0Ga5Ec/Ui+Ko3Wq=="),
}


@pytest.mark.parametrize("where", ["spark.conf", "source.options", "sink.options"])
@pytest.mark.parametrize("case", TOKEN_VALUES)
def test_a_secret_in_a_value_is_refused_naming_the_key_never_the_value(tmp_path: Path, where: str,
                                                                        case: str) -> None:
    key, value = TOKEN_VALUES[case]
    settings = {key: value}
    pipeline = {"name": "p", "source": {"path": "//q", "options": {"consumer_path": "//c"}},
                "sink": {"format": "console"}}
    config: dict = {"pipelines": [pipeline]}
    if where == "spark.conf":
        config["spark"] = {"conf": settings}
    else:
        pipeline[where.split(".")[0]]["options"] = {**pipeline[where.split(".")[0]].get("options", {}), **settings}
    path = tmp_path / "opsd.yaml"
    path.write_text(json.dumps(config))
    with pytest.raises(ConfigError) as error:
        load_config(path)
    message = str(error.value)
    assert where in message and repr(key) in message and "would hold a secret" in message
    assert value not in message and PASSWORD not in message and value[-9:] not in message


def test_values_that_only_look_long_or_name_where_a_secret_is_are_accepted(tmp_path: Path) -> None:
    conf = {
        "spark.executorEnv.YT_CONFIG_PATCHES": '{token_path="/var/run/secrets/yt/token"; proxy={url="hahn"}}',
        "spark.kubernetes.executor.secretKeyRef.YT_TOKEN": "opsd-yt-token:token",
        "spark.kubernetes.container.image": "opsd@sha256:" + "0f" * 32,
        "spark.sql.streaming.checkpointFileManagerClass":
            "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
        "spark.driver.extraJavaOptions": "-XX:MaxRAMPercentage=75 -Dlog4j2.configurationFile=file:///etc/l.xml",
        "spark.kubernetes.driver.pod.name": "${env:OPSD_POD_NAME}",
        "spark.app.name": "SomeVeryLongCamelCaseName2WithDigits3AndMoreWords",
        "spark.local.dir": "/data/Team2/ProjectX/Checkpoints/Stream1_v2/More3",
        "spark.app.id": "123e4567-e89b-12d3-a456-426614174000",
    }
    path = tmp_path / "opsd.yaml"
    path.write_text(json.dumps({"spark": {"conf": conf}, "pipelines": [
        {"name": "p", "source": {"format": "rate"}, "sink": {"format": "console"}}]}))
    assert load_config(path).spark.conf == conf


# -- every token source the client reads, one at a time, each followed through a rotation ----------------------------

def token_source(source: str, home: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Sets the one token source `source` (the rest cleared, HOME at `home`); returns what writes its next token."""
    import streaming_core.redaction as redaction

    for name in ("YT_TOKEN", "YT_TOKEN_PATH", "YT_CONFIG_PATCHES", "YT_CONFIG_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(redaction, "GLOBAL_CONFIG_FILE", home / "etc-ytclient.conf")
    (home / ".yt").mkdir(exist_ok=True)
    files = {"YT_TOKEN_PATH": home / "token-file", "~/.yt/token": home / ".yt" / "token",
             "YT_CONFIG_PATH": home / "config", "~/.yt/config": home / ".yt" / "config",
             "/etc/ytclient.conf": home / "etc-ytclient.conf", "token_path": home / "named-by-token-path"}
    if source == "YT_TOKEN_PATH":
        monkeypatch.setenv("YT_TOKEN_PATH", str(files[source]))
    if source == "YT_CONFIG_PATH":
        monkeypatch.setenv("YT_CONFIG_PATH", str(files[source]))
    if source == "token_path":
        (home / ".yt" / "config").write_text(f'{{token_path="{files[source]}"}}')

    def write(token: str) -> None:
        if source == "YT_TOKEN":
            monkeypatch.setenv("YT_TOKEN", token)
        elif source == "YT_CONFIG_PATCHES":
            monkeypatch.setenv("YT_CONFIG_PATCHES", f'{{proxy={{url="hahn"}}; token="{token}"}}')
        elif source in ("YT_CONFIG_PATH", "~/.yt/config", "/etc/ytclient.conf"):
            files[source].write_text(f'{{"proxy": {{"url": "hahn"}}, "token": "{token}"}}')
        else:
            files[source].write_text(token + "\n")
    return write


@pytest.mark.parametrize("source", ["YT_TOKEN", "YT_TOKEN_PATH", "~/.yt/token", "YT_CONFIG_PATCHES", "YT_CONFIG_PATH",
                                    "~/.yt/config", "/etc/ytclient.conf", "token_path"])
def test_the_redactor_masks_each_token_source_and_follows_its_rotation(
        source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write = token_source(source, tmp_path, monkeypatch)
    write("first-token-Aa11Bb22")
    now = [0.0]
    redactor = Redactor(source=known_secrets, clock=lambda: now[0])
    assert redactor.text("sent first-token-Aa11Bb22") == f"sent {REDACTED}"

    write("rotated-token-Cc33Dd44")
    now[0] += REFRESH_SECONDS
    assert redactor.text("sent rotated-token-Cc33Dd44") == f"sent {REDACTED}"


def test_no_piece_of_a_secret_eight_characters_long_survives_the_redaction() -> None:
    """Seeded random secrets over a small alphabet (so that pieces overlap, repeat and touch) and texts quoting
    windows of them: no `MIN_SECRET_LENGTH` characters of a secret in a row are left, and text holding none of them
    is left as it was."""
    import random

    from streaming_core.redaction import MIN_SECRET_LENGTH

    rng = random.Random("fragments")
    for _ in range(500):
        secrets = ["".join(rng.choices("abAB01-", k=rng.randint(8, 40))) for _ in range(rng.randint(1, 3))]
        quoted = [secret[rng.randint(0, 6):rng.randint(7, 40)] for secret in secrets]
        text = " ".join(rng.choice([*quoted, "plain words", "".join(rng.choices("abAB01- ", k=12))]) for _ in range(8))
        masked = Redactor(secrets).text(text)
        assert [s[i:i + MIN_SECRET_LENGTH] for s in secrets for i in range(len(s) - MIN_SECRET_LENGTH + 1)
                if s[i:i + MIN_SECRET_LENGTH] in masked] == [], (secrets, text, masked)
        assert Redactor(secrets).text("plain words, //home/queue 12") == "plain words, //home/queue 12"
