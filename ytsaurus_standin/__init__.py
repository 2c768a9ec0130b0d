"""A YTsaurus HTTP proxy stand-in on loopback: HTTP API v4 as `ytsaurus-client` speaks it, over the embedded cluster.

YTsaurus itself cannot run where this project is tested, so the YTsaurus backend (`yt://proxy`) is tested
through the real client, the real wire formats and the real HTTP path against this server: discovery, heavy
proxies, parameters in headers, OAuth, YTsaurus error objects and trailers, over HTTP or HTTPS. Its storage is an
embedded cluster, so the two backends share the semantics the cluster contract already holds; where the
YTsaurus docs say otherwise, the docs win (and the stand-in is fixed).

    with StandinProxy(root, token="s3cret") as proxy:
        cluster = connect(proxy.uri, token="s3cret")

As a YTsaurus cluster's HTTP side, it is several proxies over one storage (`proxies`, 3 by default), each on a port
of its own with its own sticky pool of tablet transactions (`sticky`: another proxy answers 11000), which `/hosts`
lists, and a balancer in front of them that serves each request as a proxy picked at random. `proxy.uri` and
`proxy.address` are the balancer's, as a user's cluster address is; `proxy.proxies` the proxies' addresses.

With `auto_trim_seconds` it also trims queues by their `@auto_trim_config` every that many seconds, as a
YTsaurus cluster's Queue Agent does (`embedded.auto_trimmer`), while `//sys/queue_agents/config` switches automatic
trimming on (`queue_agent`). `proxy.faults` injects failures (a 503, an error in a
body's trailer); `proxy.served` records each answered request (command, TLS or not, the Authorization header), for
tests of what crossed the wire. Modules: `http`
(the protocol), `sticky` (a proxy's tablet transactions), `commands` (each command over the embedded cluster),
`query` (the query subset of `select_rows`), `errors` (YTsaurus error objects and codes).
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

from .commands import Commands
from .errors import UNAVAILABLE
from .http import Fault, ProxyState, Served, StandinServer
from .registrations import REGISTRATION_DELAY_SECONDS
from .tablets import STATE_CHANGE_SECONDS

__all__ = ["PROXIES", "UNAVAILABLE", "Fault", "Served", "StandinProxy"]

#: Proxies behind the balancer unless told otherwise: enough that a request that should have gone to the proxy
#: holding its transaction misses it most of the time.
PROXIES = 3
#: How often each server's loop looks whether it is asked to stop (the standard library's 0.5 s made stopping a
#: stand-in of four servers take a second or two).
STOP_POLL_SECONDS = 0.05


class StandinProxy:
    """The stand-in's balancer on `127.0.0.1:<port>` (a free port by default) in front of `proxies` proxies (each on a
    free port), serving the embedded cluster at `root`.

    `token`: the OAuth token every command must carry (None: no authentication). `tls`: a (certificate, key) pair
    of PEM files to serve HTTPS. `cluster_name`: `//sys/@cluster_name`, which must be the storage's own
    (the embedded cluster writes `local` into consumer rows). `input_formats`: the row formats `insert_rows` takes
    (a proxy may refuse `arrow`). `ca_bundle`: the CA's PEM file, named in `uri`. `auto_trim_seconds`: trim queues
    by their `@auto_trim_config` every that many seconds (None: never). `proxies`: how many proxies stand behind the
    balancer (1: every request meets the proxy that holds its transactions). `registration_delay_seconds`: how long
    after `register_queue_consumer` the slowest proxy still answers "not registered", each proxy on a schedule of
    its own (`registrations.RegistrationCaches`; YTsaurus' 10 s by default). `tablet_state_seconds`: how long a mount
    or an unmount stays in progress, and twice that a remount's mount caches stale (`tablets.TabletStates`). `clock`:
    the seconds the proxies' delays (registrations, mounts) and master transactions' timeouts are measured in
    (monotonic by default; a test may move it on instead of waiting). `users`: tokens of users other than `root`
    (whose token is `token`), and the user each names: what they may do is what the nodes' `@acl` grant them
    (`acl`). A context manager: started on enter,
    stopped on exit.
    """

    def __init__(self, root: str | Path, *, token: str | None = None, tls: tuple[str, str] | None = None,
                 host: str = "127.0.0.1", port: int = 0, cluster_name: str = "local",
                 input_formats: tuple[str, ...] = ("yson", "json", "arrow"), ca_bundle: str | None = None,
                 auto_trim_seconds: float | None = None, proxies: int = PROXIES,
                 registration_delay_seconds: float = REGISTRATION_DELAY_SECONDS,
                 tablet_state_seconds: float = STATE_CHANGE_SECONDS,
                 clock: Callable[[], float] = time.monotonic, users: dict[str, str] | None = None) -> None:
        context = None
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
        self.root = Path(root).resolve()
        commands = Commands(str(self.root), cluster_name, registration_delay_seconds=registration_delay_seconds,
                            tablet_state_seconds=tablet_state_seconds, clock=clock)
        self.state = ProxyState(commands=commands, token=token, heavy_proxies=[], tls=tls is not None,
                                input_formats=input_formats, users=dict(users or {}))
        self._proxies = [StandinServer((host, 0), self.state, context) for _ in range(proxies)]
        self.proxies = [server.address for server in self._proxies]
        self.state.heavy_proxies.extend(self.proxies)
        commands.registration_caches.add_proxies(self.proxies)
        balancer = StandinServer((host, port), self.state, context, tuple(server.pool for server in self._proxies))
        self._servers = [balancer, *self._proxies]
        self.address = balancer.address
        self.ca_bundle = ca_bundle
        self._threads: list[threading.Thread] = []
        self.auto_trimmer = None if auto_trim_seconds is None else \
            commands.queue_agent.trimmer(period_seconds=auto_trim_seconds)

    @property
    def uri(self) -> str:
        """The cluster URI that reaches the balancer (`yt://` over HTTP, `yt+https://` over HTTPS, with the CA bundle
        that verifies its certificate when one was given)."""
        return self.uri_of(self.address)

    def uri_of(self, address: str) -> str:
        """The cluster URI of one of the stand-in's addresses (a proxy's, to talk to that proxy only)."""
        query = f"?{urlencode({'ca_bundle': self.ca_bundle})}" if self.ca_bundle else ""
        return f"{'yt+https' if self.state.tls else 'yt'}://{address}{query}"

    @property
    def faults(self) -> list[Fault]:
        return self.state.faults

    @property
    def served(self) -> list[Served]:
        return self.state.served

    def start(self) -> StandinProxy:
        for server in self._servers:
            thread = threading.Thread(target=server.serve_forever, args=(STOP_POLL_SECONDS,),
                                      name=f"yt-standin-{server.address}", daemon=True)
            thread.start()
            self._threads.append(thread)
        if self.auto_trimmer is not None:
            self.auto_trimmer.start()
        return self

    def stop(self) -> None:
        if self.auto_trimmer is not None:
            self.auto_trimmer.stop()
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self.state.commands.cluster.close()

    def __enter__(self) -> StandinProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
