"""Secrets in opsd: the one redaction (`redact`, `Redactor`: the connector's, `streaming_core.redaction`, which
opsd's logs, `/status`, `/metrics`, the CLI and config errors pass through) and the check that keeps secrets out of a
config's values (`secret_in_value`: `spark.conf`, source and sink options).

`secret_in_value` refuses a value by what it holds, whatever its key:

- a secret-named setting inside it (`token="..."` in `spark.executorEnv.YT_CONFIG_PATCHES`, `-D...Password=...` in JVM
  options; `token_path` and `*_file` name a file and are fine);
- a token of a shape YTsaurus is used with: Yandex OAuth (`AQAD-...`, `y0_...`), a token of YTsaurus' `issue-token`
  (16 random bytes as 32 lower-case hex digits: `DoIssueTokenImpl` in
  `yt/yt/ytlib/api/native/client_authentication_impl.cpp`) or any longer hex secret (`openssl rand -hex`); a digest
  named by its algorithm (`sha256:...`, an image's) is not one;
- a run of `RANDOM_RUN_LENGTH` or more base64 / base64url characters that reads as random bytes rather than as names
  (`reads_as_random`). Measured on seeded random strings and on ordinary values (`tests/test_security_secret_values.py`
  prints both rates): 40 random base64, base64url or alphanumeric characters are missed about 2 times in 10,000 (1 of
  3,000 at most in the test; the former rule, which asked for two digits among other things, missed 35 of 3,000), 64
  or upper-case base32 never; no path, class name, JVM option, host name or UUID is refused (0 of ~32,000 names of
  Spark's jars and PySpark's files; 0 of ~130,000 runs of names under /usr and a site-packages when the model was
  made). Random lower-case letters and digits are out of its reach (they read as names about 1 time in 15): hex, the
  one such shape YTsaurus issues, is caught by its own.
"""

from __future__ import annotations

import itertools
import math
import re

from streaming_core.redaction import (
    REDACTED,
    REFRESH_SECONDS,
    SECRET_KEY,
    Redactor,
    is_secret_key,
    known_secrets,
    redact,
)

__all__ = ["REDACTED", "REFRESH_SECONDS", "SECRET_KEY", "Redactor", "is_secret_key", "known_secrets",
           "reads_as_random", "redact", "secret_in_value"]

# A digest named by its algorithm is not a secret (`opsd@sha256:...`, an image's): taken out before the shapes are read.
_NAMED_DIGEST = re.compile(r"\b(?:sha(?:1|224|256|384|512)|md5):[0-9a-fA-F]+", re.IGNORECASE)
_TOKEN_SHAPES = re.compile(r"(?<![\w-])(AQA[A-Za-z0-9][\w-]{24,}|y[0-4]_[\w-]{24,}|[0-9a-fA-F]{32,}(?![\w-]))")
#: The shortest run of base64 (or base64url) characters read for randomness: shorter ones are too often names.
RANDOM_RUN_LENGTH = 40
_BASE64_RUN = re.compile(rf"[A-Za-z0-9+/_-]{{{RANDOM_RUN_LENGTH},}}")
# How one character follows another in names, by kind (a vowel, a consonant, a digit, one of `+/_-`), and between two
# letters by case: estimated from ~150,000 runs of 8 or more such characters (file paths under /usr and in a Python
# site-packages, the entries of Spark's jars, the JVM's flag names), rounded. Random base64 draws each character
# uniformly from 64: a vowel 10/64, a consonant 42/64, a digit 10/64, a symbol 2/64; either case 1/2.
_KINDS = "vcds"
_NAMES = {"v": (0.090, 0.805, 0.003, 0.102), "c": (0.456, 0.372, 0.018, 0.154),
          "d": (0.024, 0.075, 0.482, 0.418), "s": (0.192, 0.721, 0.029, 0.059)}
_NAMES_CASE = {(True, True): 0.219, (True, False): 0.781, (False, True): 0.023, (False, False): 0.977}
_RANDOM = {"v": 10 / 64, "c": 42 / 64, "d": 10 / 64, "s": 2 / 64}
# Bits of evidence per character pair, random over names, from which a run is random: random base64 of 40 characters
# averages ~1.6, its lowest 1 in 10,000 ~0.25; the highest of the names ~0.2.
_RANDOM_BITS = 0.3
_PAIR_BITS = {(a, b): math.log2(_RANDOM[b] / _NAMES[a][_KINDS.index(b)]) for a in _KINDS for b in _KINDS}
_CASE_BITS = {pair: math.log2(0.5 / p) for pair, p in _NAMES_CASE.items()}
# A setting inside a value: `token="..."` (YSON), `"token": "..."` (JSON), `-Dx.password=...` (JVM options).
_SETTING = re.compile(r'(?:-D)?([\w.-]+)"?\s*[=:]\s*("[^"]*"|[^\s;,}"]+)')
# A setting that names where a secret is, not the secret (`token_path`, `...File`).
_REFERENCE_SETTING = re.compile(r"(path|file)$", re.IGNORECASE)


def _kind(character: str) -> str:
    if character.isdigit():
        return "d"
    if character.isalpha():
        return "v" if character in "aeiouAEIOU" else "c"
    return "s"


def reads_as_random(run: str) -> bool:
    """Whether `run` (base64 or base64url characters) is more likely random bytes than a name, by `_RANDOM_BITS` bits
    per pair of neighbouring characters."""
    bits = 0.0
    for a, b in itertools.pairwise(run):
        bits += _PAIR_BITS[_kind(a), _kind(b)]
        if a.isalpha() and b.isalpha():
            bits += _CASE_BITS[a.isupper(), b.isupper()]
    return bits >= _RANDOM_BITS * (len(run) - 1)


def secret_in_value(value: str, settings: bool = True) -> str | None:
    """What in `value` (a Spark conf or data source option's value) is a secret, never the secret itself: a
    secret-named setting inside it (only when `settings`), a token-shaped value or a long run of random base64
    (module docstring); None when nothing is."""
    if settings:
        for key, setting in _SETTING.findall(value):
            if is_secret_key(key) and not _REFERENCE_SETTING.search(key) and setting.strip('"'):
                return f"a {key} setting"
    value = _NAMED_DIGEST.sub("", value)
    if _TOKEN_SHAPES.search(value) or any(map(reads_as_random, _BASE64_RUN.findall(value))):
        return "a token-shaped value"
    return None
