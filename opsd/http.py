"""opsd's HTTP endpoints: ``/metrics``, ``/healthz``, ``/readyz`` and ``/status``.

A stdlib ``ThreadingHTTPServer`` in a daemon thread: no extra dependency, and a slow scrape never
blocks the driver. Port 0 binds an ephemeral port, exposed as :attr:`OpsHttpServer.port`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from functools import partial
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, generate_latest

from opsd.families import CONTENT_TYPE
from opsd.status import ProgressPolicy, StatusStore, evaluate_readiness

log = structlog.get_logger(__name__)

_JSON = "application/json"


class OpsHttpServer:
    """Serves the registry and the status store.

    ``clock`` (unix seconds) and ``policy`` decide ``/readyz``; both are injectable for tests.
    ``exposition`` renders ``/metrics``; opsd passes ``Metrics.render`` (text-cached, fast), without it
    prometheus_client renders the registry.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        status: StatusStore,
        host: str = "127.0.0.1",
        port: int = 0,
        policy: ProgressPolicy | None = None,
        clock: Callable[[], float] = time.time,
        exposition: Callable[[], bytes] | None = None,
    ) -> None:
        self.registry = registry
        self.exposition = exposition or partial(generate_latest, registry)
        self.status = status
        self.policy = policy or ProgressPolicy()
        self.clock = clock
        self._server = ThreadingHTTPServer((host, port), _handler_for(self))
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
            readiness = evaluate_readiness(self.status.snapshot().values(), self.clock(), self.policy)
            code = HTTPStatus.OK if readiness.ready else HTTPStatus.SERVICE_UNAVAILABLE
            return code, _JSON, _json_bytes(readiness.to_json())
        if route == "/status":
            return HTTPStatus.OK, _JSON, _json_bytes(self.status.to_json())
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
