"""How the YTsaurus backend reaches the cluster: the `YtClient` factory, its retry bounds, and the wire arguments.

A proxy that does not resolve or refuses connections is reported at once (`UnreachableClusterError`, naming the
proxy and where the URI came from) instead of after the client's two minutes of retries; errors that can pass
(a busy or restarting proxy) are still retried with backoff, for at most `OPSD_YT_RETRY_SECONDS` (default 30).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from datetime import timedelta
from typing import Any
from urllib.parse import urlparse

import yt.wrapper as yt
from yt.wrapper.http_helpers import get_proxy_address_url

from ..errors import UnreachableClusterError
from .rows import WIRE_FORMAT

#: The keyword arguments of every `yt.wrapper` call that sends or returns rows: Python rows, in `WIRE_FORMAT`.
WIRE = {"format": WIRE_FORMAT, "raw": False}
#: Seconds to wait for the proxy's TCP handshake before calling it unreachable.
CONNECT_TIMEOUT_SECONDS = 5.0
RETRY_SECONDS_ENV = "OPSD_YT_RETRY_SECONDS"
DEFAULT_RETRY_SECONDS = 30.0
WHERE_THE_URI_COMES_FROM = ("the cluster URI: --cluster (opsd), the `cluster` option or spark.yt.cluster (Spark), "
                            "`cluster:` (opsd run), $OPSD_CLUSTER or $YT_PROXY")

ClientFactory = Callable[[str, str | None, dict[str, Any] | None], Any]


def default_client_factory(proxy: str, token: str | None, config: dict[str, Any] | None) -> yt.YtClient:
    """A real `YtClient` with bounded retries, after checking that its proxy can be reached at all."""
    client = yt.YtClient(proxy=proxy, token=token, config={"proxy": {"retries": {
        "total_timeout": timedelta(seconds=retry_seconds())}}, **(config or {})})
    check_reachable(proxy, get_proxy_address_url(client=client))
    return client


def retry_seconds() -> float:
    value = os.environ.get(RETRY_SECONDS_ENV)
    try:
        return DEFAULT_RETRY_SECONDS if value is None else max(0.0, float(value))
    except ValueError:
        raise ValueError(f"${RETRY_SECONDS_ENV} must be a number of seconds, got {value!r}") from None


def check_reachable(proxy: str, url: str, timeout: float = CONNECT_TIMEOUT_SECONDS) -> None:
    """Raise `UnreachableClusterError` when the proxy's address does not resolve or refuses a connection."""
    parsed = urlparse(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        socket.create_connection((parsed.hostname, port), timeout=timeout).close()
    except OSError as e:
        reason = e.strerror or str(e) or type(e).__name__
        raise UnreachableClusterError(f"YTsaurus proxy {proxy} ({parsed.hostname}:{port}) cannot be reached: "
                                      f"{reason}; check {WHERE_THE_URI_COMES_FROM}") from None
