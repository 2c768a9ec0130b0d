"""opsd's HTTP endpoint: `/metrics`, `/healthz`, `/readyz` and `/status`, served from callables.

It runs in the driver's process, so no client may cost it a thread or hold it up: one daemon thread runs an asyncio
loop that reads every request's head (at most `MAX_HEAD_BYTES`, within `CLIENT_TIMEOUT_SECONDS`, else the
connection is closed), and only a complete request takes one of `WORKERS` threads to render its answer. At most
`MAX_CONNECTIONS` connections are open at once; a new one then closes the oldest that is still sending its head (a
slow or half-sent request), so that a scrape gets in whatever idle connections are held. One request per
connection (`Connection: close`), GET and HEAD only. Every document leaves through the redaction of
`opsd.telemetry.redaction`.

With a bearer token (`BearerToken`: a file, such as a mounted Secret, read at every request so a rotation applies at
once), `/metrics` and `/status` answer 401 to a request without `Authorization: Bearer <token>`; `/healthz` and
`/readyz` stay open for the kubelet's probes. A 401 carries the challenge of RFC 6750 (`WWW-Authenticate: Bearer`).
`/status` serves failure texts without the row values they quote (`opsd.telemetry.row_values`) unless `row_values`
asks for them.

Port 0 binds an ephemeral port, exposed as `OpsHttpServer.port`. A port taken by another process is a
`PortInUseError` naming host and port; `check_port_free` finds it before anything slow (Spark) has started. The
server knows nothing of queries: the caller passes what renders each document (`opsd.runtime.monitor` wires the
status store and readiness).
"""

from __future__ import annotations

import asyncio
import errno
import hmac
import json
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any

import structlog

from opsd.telemetry.families import CONTENT_TYPE
from opsd.telemetry.redaction import Redactor
from opsd.telemetry.row_values import without_row_values_in

log = structlog.get_logger(__name__)

_JSON = "application/json"
_TEXT = "text/plain; charset=utf-8"
#: A request line and headers larger than this are refused (431): a scrape's are a few hundred bytes.
MAX_HEAD_BYTES = 16 * 1024


@dataclass(frozen=True)
class HttpLimits:
    """What one client may cost the process: time to send its request and read the answer, threads, sockets."""

    #: Seconds a client has to send its request head, and again to take the answer.
    client_timeout_seconds: float = 10.0
    #: Threads that render answers (the documents are small; a scrape takes milliseconds).
    workers: int = 4
    #: Connections open at once; beyond it the oldest one still sending its head is closed.
    max_connections: int = 128


#: The documents a bearer token guards (the probes stay open: a kubelet sends no token).
GUARDED = ("/metrics", "/status")
#: The challenge every 401 carries (RFC 6750, section 3): the scheme the endpoint asks for.
CHALLENGE = 'Bearer realm="opsd"'


@dataclass(frozen=True)
class BearerToken:
    """The token in the file at `path`, read at every request (a rotated Secret applies at once); an unreadable or
    empty file accepts nobody."""

    path: str

    def accepts(self, authorization: str | None) -> bool:
        try:
            expected = Path(self.path).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as e:
            log.warning("http_bearer_token_unreadable", path=self.path, error=type(e).__name__)
            return False
        scheme, _, given = (authorization or "").strip().partition(" ")
        return bool(expected) and scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(),
                                                                                     expected.encode())


class PortInUseError(OSError):
    """The endpoint's port is taken; the message names it (the caller adds which option chooses another)."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(errno.EADDRINUSE, f"port {port} on {host} is already in use")
        self.host = host
        self.port = port

    def __str__(self) -> str:
        return str(self.strerror)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=128)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise PortInUseError(host, port) from e
        raise


def check_port_free(host: str, port: int) -> None:
    """Raise `PortInUseError` when the endpoint could not bind `host:port` now (port 0 is always free)."""
    if port:
        _bind(host, port).close()


#: `/readyz`: (ready, JSON document); `/status`: a JSON document.
Readiness = Callable[[], tuple[bool, Any]]


def _always_ready() -> tuple[bool, Any]:
    return True, {"ready": True}


class OpsHttpServer:
    """Serves `exposition()` at `/metrics`, `status()` at `/status` and `readiness()` at `/readyz`."""

    def __init__(
        self,
        exposition: Callable[[], bytes],
        *,
        status: Callable[[], Any] = dict,
        readiness: Readiness = _always_ready,
        host: str = "127.0.0.1",
        port: int = 0,
        limits: HttpLimits = HttpLimits(),
        token: BearerToken | None = None,
        row_values: bool = False,
    ) -> None:
        self.exposition = exposition
        self.token = token
        self.row_values = row_values
        self.status = status
        self.readiness = readiness
        self.limits = limits
        self._socket = _bind(host, port)
        self._address = self._socket.getsockname()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._workers: ThreadPoolExecutor | None = None
        # Open connections, oldest first; True once the request head has arrived (then it is never evicted).
        self._open: dict[asyncio.StreamWriter, bool] = {}

    @property
    def host(self) -> str:
        return str(self._address[0])

    @property
    def port(self) -> int:
        """The bound port (the real one when constructed with port 0)."""
        return int(self._address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def open_connections(self) -> int:
        """Connections open now (reading a request, rendering or sending an answer)."""
        return len(self._open)

    def start(self) -> None:
        """Serve in a daemon thread (idempotent); returns once the server accepts connections."""
        if self._thread is not None:
            return
        self._workers = ThreadPoolExecutor(self.limits.workers, thread_name_prefix="opsd-http-worker")
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve_forever, args=(ready,), name="opsd-http", daemon=True)
        self._thread.start()
        ready.wait()
        log.info("http_server_started", host=self.host, port=self.port)

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._thread = None
        if self._workers is not None:
            self._workers.shutdown(wait=False, cancel_futures=True)
            self._workers = None
        self._socket.close()

    def respond(self, path: str, authorization: str | None = None) -> tuple[int, str, bytes]:
        """Status code, content type and body for a GET of ``path`` (with the request's `Authorization` header);
        secrets masked in every body."""
        route = path.split("?", 1)[0]
        redactor = Redactor.from_environment()
        if route in GUARDED and self.token is not None and not self.token.accepts(authorization):
            return HTTPStatus.UNAUTHORIZED, _JSON, b'{"error": "unauthorized: send Authorization: Bearer <token>"}'
        if route == "/metrics":
            return HTTPStatus.OK, CONTENT_TYPE, redactor.text(self.exposition().decode()).encode()
        if route == "/healthz":
            return HTTPStatus.OK, _TEXT, b"ok\n"
        if route == "/readyz":
            ready, document = self.readiness()
            return HTTPStatus.OK if ready else HTTPStatus.SERVICE_UNAVAILABLE, _JSON, _json_bytes(redactor, document)
        if route == "/status":
            document = self.status() if self.row_values else without_row_values_in(self.status())
            return HTTPStatus.OK, _JSON, _json_bytes(redactor, document)
        return HTTPStatus.NOT_FOUND, _JSON, _json_bytes(redactor, {"error": "not found", "path": route})

    # -- the loop thread ------------------------------------------------------------------------------------

    def _serve_forever(self, ready: threading.Event) -> None:
        loop = self._loop
        assert loop is not None
        asyncio.set_event_loop(loop)
        server = loop.run_until_complete(asyncio.start_server(self._connection, sock=self._socket,
                                                              limit=MAX_HEAD_BYTES))
        ready.set()
        try:
            loop.run_forever()
        finally:
            server.close()
            for writer in list(self._open):
                writer.transport.abort()
            loop.run_until_complete(server.wait_closed())
            for task in asyncio.all_tasks(loop):
                task.cancel()
            loop.run_until_complete(asyncio.gather(*asyncio.all_tasks(loop), return_exceptions=True))
            loop.close()

    def _admit(self, writer: asyncio.StreamWriter) -> bool:
        """Make room for `writer`: close the oldest connection still sending its head when all are taken."""
        if len(self._open) >= self.limits.max_connections:
            waiting = next((w for w, has_head in self._open.items() if not has_head), None)
            if waiting is None:
                return False
            del self._open[waiting]
            waiting.transport.abort()
            log.debug("http_connection_evicted", open=len(self._open))
        self._open[writer] = False
        return True

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._admit(writer):
            writer.transport.abort()
            return
        try:
            code, content_type, body, method = await self._answer(reader, writer)
            challenge = f"WWW-Authenticate: {CHALLENGE}\r\n" if code == HTTPStatus.UNAUTHORIZED else ""
            head = (f"HTTP/1.1 {code} {HTTPStatus(code).phrase}\r\nContent-Type: {content_type}\r\n{challenge}"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode("latin-1")
            writer.write(head if method == "HEAD" else head + body)
            await asyncio.wait_for(writer.drain(), self.limits.client_timeout_seconds)
            writer.close()
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            writer.transport.abort()  # a slow, half-sent or vanished client: dropped, with what it did not take
        finally:
            self._open.pop(writer, None)

    async def _answer(self, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> tuple[int, str, bytes, str]:
        """(code, content type, body, method) for the request `reader` brings."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.limits.client_timeout_seconds)
        except asyncio.LimitOverrunError:
            return HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, _TEXT, b"request head too large\n", "GET"
        self._open[writer] = True
        request, *headers = head.decode("latin-1").split("\r\n")
        method, _, rest = request.partition(" ")
        path = rest.partition(" ")[0]
        authorization = next((value.strip() for name, _, value in (h.partition(":") for h in headers)
                              if name.strip().lower() == "authorization"), None)
        if method not in ("GET", "HEAD"):
            return HTTPStatus.METHOD_NOT_ALLOWED, _TEXT, b"only GET and HEAD\n", "GET"
        loop = asyncio.get_running_loop()
        try:
            code, content_type, body = await loop.run_in_executor(self._workers, self.respond, path, authorization)
        except Exception:
            log.exception("http_request_failed", path=path)
            code, content_type, body = HTTPStatus.INTERNAL_SERVER_ERROR, _JSON, b'{"error": "internal"}'
        log.debug("http_request", client=writer.get_extra_info("peername"), method=method, path=path, code=int(code))
        return code, content_type, body, method


def _json_bytes(redactor: Redactor, document: Any) -> bytes:
    return json.dumps(redactor.value(document), sort_keys=True).encode()

