"""How the YTsaurus backend reaches the cluster: the `YtClient` factory, its retry bounds, and the wire arguments.

The client is configured as `ytsaurus-client` configures itself — `YT_CONFIG_PATCHES`, the config file
(`~/.yt/config`, `YT_CONFIG_PATH`), `YT_*` variables (`YT_PREFER_HTTPS`, `YT_TOKEN`, `YT_TOKEN_PATH`; the token
file `~/.yt/token`) — and then only what the cluster URI says explicitly (the scheme of `yt+https://`, a CA bundle)
and the retry bound below are laid over it. A token about to travel over plain HTTP to a host that is not this
machine is warned about once, with the way to switch to HTTPS.

A proxy that does not resolve or refuses connections is reported at once (`UnreachableClusterError`, naming the
proxy and where the URI came from) instead of after the client's two minutes of retries; errors that can pass
(a busy or restarting proxy) are still retried with backoff, for at most `OPSD_YT_RETRY_SECONDS` (default 30) in
each of the client's retry loops (requests, dynamic-table calls, table reads and writes).

A tablet transaction over HTTP lives only in the proxy that started it (YTsaurus' sticky transaction pool; any other
proxy answers 11000), while the client sends row calls to a random proxy from `/hosts`. So each tablet transaction
gets a client of its own pinned to one proxy (`pinned_client`): picked from `/hosts` as the client picks a heavy
proxy (role, address type, bans), with proxy discovery off, so that its start, every call in it, its pings and its
commit meet that proxy; never the balancer in front of the proxies.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Callable
from datetime import timedelta
from typing import Any
from urllib.parse import urlparse

import yt.wrapper as yt
from yt.wrapper.common import update
from yt.wrapper.default_config import get_config_from_env
from yt.wrapper.http_driver import HeavyProxyProvider
from yt.wrapper.http_helpers import get_proxy_address_url, get_token

from ...log import get_logger
from ..errors import UnreachableClusterError
from .rows import WIRE_FORMAT

#: The keyword arguments of the small row calls (consumer offsets, registrations, keys): Python rows in `WIRE_FORMAT`.
WIRE = {"format": WIRE_FORMAT, "raw": False}
#: ... and of the bulk ones (queue reads, inserts, static tables): the bytes themselves, converted a column at a time
#: (`wire.decode_wire` / `wire.encode_wire`), never a Python object per value.
WIRE_RAW = {"format": WIRE_FORMAT, "raw": True}
#: Inserts in the `arrow` input format, where the proxy takes it (`wire.arrow_insert`).
ARROW_RAW = {"format": yt.format.ArrowFormat(), "raw": True}
#: Seconds to wait for the proxy's TCP handshake before calling it unreachable.
CONNECT_TIMEOUT_SECONDS = 5.0
RETRY_SECONDS_ENV = "OPSD_YT_RETRY_SECONDS"
DEFAULT_RETRY_SECONDS = 30.0
WHERE_THE_URI_COMES_FROM = ("the cluster URI: --cluster (opsd), the `cluster` option or spark.yt.cluster (Spark), "
                            "`cluster:` (opsd run), $OPSD_CLUSTER or $YT_PROXY")

ClientFactory = Callable[[str, str | None, dict[str, Any] | None], Any]
#: Picks the proxy a tablet transaction is pinned to, with the cluster's client (`pick_heavy_proxy`).
ProxyPicker = Callable[[Any], str]

log = get_logger(__name__)
_warned_plain_http: set[str] = set()


def default_client_factory(proxy: str, token: str | None, config: dict[str, Any] | None) -> yt.YtClient:
    """A real `YtClient` with bounded retries, after checking that its proxy can be reached at all.

    `token` None: the client finds it itself (`YT_TOKEN`, `YT_TOKEN_PATH`, `~/.yt/token`).
    """
    client = yt.YtClient(config=client_config(proxy, token, config))
    url = get_proxy_address_url(client=client)
    warn_plain_http(url, client_token(client))
    check_reachable(proxy, url)
    return client


def pick_heavy_proxy(client: yt.YtClient) -> str:
    """The proxy `client` would send a heavy request to: one of the top proxies `/hosts` lists for its role and address
    type, not banned (its own proxy when discovery is off)."""
    return HeavyProxyProvider(client)()


def pinned_client(proxy: str, factory: ClientFactory, token: str | None, config: dict[str, Any] | None) -> Any:
    """A client of its own for one tablet transaction, every request of which goes to `proxy`: discovery off."""
    return factory(proxy, token, update(config or {}, {"proxy": {"enable_proxy_discovery": False}}))


def client_config(proxy: str, token: str | None, overrides: dict[str, Any] | None) -> Any:
    """The client's own configuration (environment, patches, config file) with the proxy, token and URI settings."""
    bound = {"total_timeout": timedelta(seconds=retry_seconds())}
    config = update(get_config_from_env(), {"proxy": {"url": proxy, "retries": bound}, **{
        retries: bound for retries in ("dynamic_table_retries", "read_retries", "write_retries")}})
    if token:
        config["token"] = token
    return update(config, overrides or {})


def client_token(client: Any) -> str | None:
    """The token `client` sends, wherever it came from; None when it has none or cannot read one."""
    try:
        return get_token(client=client)
    except yt.YtError:
        return None


def warn_plain_http(url: str, token: str | None) -> None:
    """Warn, once per proxy, when a token would cross plain HTTP to a host other than this machine."""
    parsed = urlparse(url)
    if token is None or parsed.scheme != "http" or _is_loopback(parsed.hostname or "") or url in _warned_plain_http:
        return
    _warned_plain_http.add(url)
    log.warning("yt_token_over_plain_http", proxy=url,
                fix=f"use yt+https://{parsed.netloc} as the cluster URI, or set YT_PREFER_HTTPS=1")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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
