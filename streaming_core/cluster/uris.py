"""Cluster URIs (see `streaming_core.cluster` for the forms they take): the default, the canonical form, and a
YTsaurus URI to and from `ytsaurus-client`'s proxy URL and configuration. Beneath the backends, which name their
own URIs by it."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlparse

from .errors import InvalidUriError
from .hosts import is_loopback

#: Root of the embedded cluster when neither the URI nor `OPSD_CLUSTER_ROOT` names one.
DEFAULT_ROOT = ".opsd/cluster"
#: The URI schemes of a YTsaurus proxy and the HTTP scheme each forces (None: the client's configuration decides).
YT_SCHEMES = {"yt": None, "yt+http": "http", "yt+https": "https"}
#: The query parameters a YTsaurus URI takes.
YT_URI_PARAMETERS = ("ca_bundle",)


def default_uri() -> str:
    """The cluster URI used when none is given (see the module docstring)."""
    if os.environ.get("OPSD_CLUSTER"):
        return os.environ["OPSD_CLUSTER"]
    if os.environ.get("YT_PROXY"):
        return yt_uri(os.environ["YT_PROXY"])
    return "local://" + str(Path(os.environ.get("OPSD_CLUSTER_ROOT", DEFAULT_ROOT)).resolve())


def resolve_uri(uri: str | None) -> str:
    """A canonical URI: absolute roots for `local://`, the default for None or empty."""
    if not uri:
        return default_uri()
    parsed = urlparse(uri)
    if parsed.scheme == "local":
        if parsed.netloc:
            raise InvalidUriError(f"cluster URI {uri!r}: use local:///absolute/path (three slashes)")
        root = parsed.path or os.environ.get("OPSD_CLUSTER_ROOT", DEFAULT_ROOT)
        return "local://" + str(Path(root).resolve())
    if parsed.scheme in YT_SCHEMES:
        if "@" in parsed.netloc:
            raise InvalidUriError(f"cluster URI {parsed.scheme}://...@{parsed.netloc.rpartition('@')[2]}: credentials "
                                  "do not belong in a URI (they would reach logs, the Spark conf and the command "
                                  "line); give the token as YT_TOKEN or a file in YT_TOKEN_PATH (a Secret on "
                                  "Kubernetes) and the proxy alone")
        if not parsed.netloc or parsed.path not in ("", "/"):
            raise InvalidUriError(f"cluster URI {uri!r}: {parsed.scheme}:// needs a proxy and nothing after it, e.g. "
                                  f"yt://hahn, yt://host:80 or yt+https://host:443")
        query = parse_qs(parsed.query, keep_blank_values=True)
        unknown = sorted(set(query) - set(YT_URI_PARAMETERS))
        if unknown:
            raise InvalidUriError(f"cluster URI {uri!r}: unknown parameter {unknown[0]!r} "
                                  f"(a YTsaurus URI takes {', '.join(YT_URI_PARAMETERS)})")
        return f"{parsed.scheme}://{parsed.netloc}" + (f"?{urlencode(query, doseq=True)}" if query else "")
    raise InvalidUriError(f"cluster URI {uri!r}: expected local:///path, yt://proxy or yt+https://proxy")


def yt_proxy(uri: str) -> tuple[str, dict]:
    """The `ytsaurus-client` proxy URL (`host:port`, or with the scheme the URI forces) and the client configuration
    the URI names (`ca_bundle`) of a resolved YTsaurus URI."""
    parsed = urlparse(uri)
    scheme = YT_SCHEMES[parsed.scheme] or (None if is_loopback(parsed.hostname) else "https")
    query = parse_qs(parsed.query)
    config = {"proxy": {"ca_bundle_path": query["ca_bundle"][-1]}} if "ca_bundle" in query else {}
    return (f"{scheme}://{parsed.netloc}" if scheme else parsed.netloc), config


def yt_uri(proxy: str, config: dict | None = None) -> str:
    """The URI of a `ytsaurus-client` proxy URL and configuration (`yt_proxy`'s inverse)."""
    parsed = urlparse(proxy if "//" in proxy else "//" + proxy)
    scheme = next((name for name, forced in YT_SCHEMES.items() if forced == (parsed.scheme or None)), "yt")
    ca_bundle = ((config or {}).get("proxy") or {}).get("ca_bundle_path")
    return f"{scheme}://{parsed.netloc}" + (f"?{urlencode({'ca_bundle': ca_bundle})}" if ca_bundle else "")
