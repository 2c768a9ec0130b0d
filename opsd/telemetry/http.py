"""opsd's HTTP endpoint: `/metrics`, `/healthz`, `/readyz` and `/status`, served from callables.

A stdlib `ThreadingHTTPServer` in a daemon thread: no extra dependency, and a slow scrape never blocks the
driver. Port 0 binds an ephemeral port, exposed as `OpsHttpServer.port`. A port taken by another process is a
`PortInUseError` naming host and port; `check_port_free` finds it before anything slow (Spark) has started. The
server knows nothing of queries: the caller passes what renders each document (`opsd.runtime.monitor` wires the
status store and readiness).
"""

from __future__ import annotations

import errno
import json
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import structlog

from opsd.telemetry.families import CONTENT_TYPE

log = structlog.get_logger(__name__)

_JSON = "application/json"


class PortInUseError(OSError):
    """The endpoint's port is taken; the message names it (the caller adds which option chooses another)."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(errno.EADDRINUSE, f"port {port} on {host} is already in use")
        self.host = host
        self.port = port

    def __str__(self) -> str:
        return str(self.strerror)


def _bind(host: str, port: int, handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    try:
        return ThreadingHTTPServer((host, port), handler)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise PortInUseError(host, port) from e
        raise


def check_port_free(host: str, port: int) -> None:
    """Raise `PortInUseError` when the endpoint could not bind `host:port` now (port 0 is always free)."""
    if port:
        _bind(host, port, BaseHTTPRequestHandler).server_close()


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
    ) -> None:
        self.exposition = exposition
        self.status = status
        self.readiness = readiness
        self._server = _bind(host, port, _handler_for(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        """The bound port (the real one when constructed with port 0)."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        """Serve in a daemon thread (idempotent)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._server.serve_forever, name="opsd-http", daemon=True)
        self._thread.start()
        log.info("http_server_started", host=self.host, port=self.port)

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def respond(self, path: str) -> tuple[int, str, bytes]:
        """Status code, content type and body for a GET of ``path``."""
        route = path.split("?", 1)[0]
        if route == "/metrics":
            return HTTPStatus.OK, CONTENT_TYPE, self.exposition()
        if route == "/healthz":
            return HTTPStatus.OK, "text/plain; charset=utf-8", b"ok\n"
        if route == "/readyz":
            ready, document = self.readiness()
            return HTTPStatus.OK if ready else HTTPStatus.SERVICE_UNAVAILABLE, _JSON, _json_bytes(document)
        if route == "/status":
            return HTTPStatus.OK, _JSON, _json_bytes(self.status())
        return HTTPStatus.NOT_FOUND, _JSON, _json_bytes({"error": "not found", "path": route})


def _json_bytes(document: Any) -> bytes:
    return json.dumps(document, sort_keys=True).encode()


def _handler_for(server: OpsHttpServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            try:
                code, content_type, body = server.respond(self.path)
            except Exception:
                log.exception("http_request_failed", path=self.path)
                code, content_type, body = HTTPStatus.INTERNAL_SERVER_ERROR, _JSON, b'{"error": "internal"}'
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            # The stdlib writes access logs to stderr; scrapes every few seconds belong at debug level.
            log.debug("http_request", client=self.client_address[0], request=format % args)

    return Handler
