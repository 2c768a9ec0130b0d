"""The spark.conf and option check refuses a value by what it holds (issue 32): token-shaped random strings of the
shapes YTsaurus is used with are refused (~0 missed), ordinary values (paths, class names, JVM options, host names,
UUIDs) are not. Both rates are measured on seeded random cases and on the names in Spark's own jars, and printed
(`pytest -s`)."""

from __future__ import annotations

import random
import string
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path

import pyspark
import pytest

from opsd.telemetry.redaction import secret_in_value

pytestmark = pytest.mark.hostile

CASES = 3000
BASE64 = string.ascii_letters + string.digits + "+/"
BASE64URL = string.ascii_letters + string.digits + "-_"
ALNUM = string.ascii_letters + string.digits


def drawn(alphabet: str, length: int, prefix: str = "") -> Callable[[random.Random], str]:
    return lambda rng: prefix + "".join(rng.choice(alphabet) for _ in range(length))


#: Each token shape: how it is made, and how many of `CASES` may pass (each rate printed).
TOKEN_SHAPES: dict[str, tuple[Callable[[random.Random], str], int]] = {
    # YTsaurus' issue-token: 16 random bytes as lower-case hex (client_authentication_impl.cpp, DoIssueTokenImpl).
    "issue-token": (lambda rng: rng.randbytes(16).hex(), 0),
    "hex-64": (lambda rng: rng.randbytes(32).hex().upper(), 0),
    # Yandex OAuth tokens, the legacy and the current form.
    "oauth-AQAD": (drawn(BASE64URL, 35, "AQAD-"), 0),
    "oauth-y0": (drawn(BASE64URL, 55, "y0_"), 0),
    # Random base64 of a secret's length, standard, URL-safe and alphanumeric: about 2 in 10,000 pass.
    "base64-40": (drawn(BASE64, 40), 3),
    "base64url-40": (drawn(BASE64URL, 40), 3),
    "alnum-40": (drawn(ALNUM, 40), 3),
    "base64-44": (lambda rng: drawn(BASE64, 42)(rng) + "==", 3),
    "base64-64": (drawn(BASE64, 64), 0),
    "base32-40": (drawn(string.ascii_uppercase + "234567", 40), 0),
}


@pytest.mark.parametrize("shape", TOKEN_SHAPES)
def test_token_shaped_random_values_are_refused(shape: str) -> None:
    make, allowed = TOKEN_SHAPES[shape]
    rng = random.Random(f"secret-values-{shape}")
    missed = [value for value in (make(rng) for _ in range(CASES)) if secret_in_value(value) is None]
    print(f"{shape}: {len(missed)} of {CASES} missed")
    assert len(missed) <= allowed, missed[:5]
    assert all(secret_in_value(f"-Dx={make(rng)} -Xmx1g") for _ in range(20)), "inside a longer value too"


def ordinary_values() -> list[str]:
    """Values a config holds that are no secret: every entry of Spark's own jars (class and resource paths, the
    longest names there are), the paths of PySpark's files, JVM options, host names and URIs, UUIDs."""
    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("spark-*.jar"))
    assert jars, "PySpark's jars"
    values = [name for jar in jars for name in zipfile.ZipFile(jar).namelist()]
    values += [str(path) for path in Path(pyspark.__file__).parent.rglob("*.py")]
    rng = random.Random("ordinary")
    values += [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(200)]
    values += ["-XX:+UseG1GC -XX:MaxRAMPercentage=75 -XX:+ExitOnOutOfMemoryError -Dlog4j2.configurationFile=file:///x",
               "-Djava.security.properties=/etc/opsd/java.security -XX:+HeapDumpOnOutOfMemoryError",
               "yt+https://hahn.yt.yandex.net:443", "k8s://https://kubernetes.default.svc.cluster.local:443",
               "registry.example.com/team/yt-streaming-opsd:1.4.2@sha256:" + "9c6f90801e6b68e772b7c0ca" * 2 + "0" * 16,
               "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
               "/home/robot-streaming/checkpoints/ClickStreamAggregationPipeline_v2/offsets",
               "SomeVeryLongCamelCaseName2WithDigits3AndMoreWords"]
    return values


def test_ordinary_values_are_accepted() -> None:
    values = ordinary_values()
    refused = [value for value in values if secret_in_value(value)]
    print(f"ordinary values: {len(refused)} of {len(values)} refused")
    assert len(values) > 30_000 and refused == []


def test_a_hex_checksum_is_refused_unless_named_by_its_algorithm() -> None:
    """A YTsaurus token is 32 hex digits: a bare hex string that long cannot be told from one. A digest named by its
    algorithm (an image's `sha256:...`) is no token."""
    digest = random.Random("digest").randbytes(32).hex()
    assert secret_in_value(digest) == "a token-shaped value"
    assert secret_in_value(f"opsd@sha256:{digest}") is None and secret_in_value(f"md5:{digest[:32]}") is None
