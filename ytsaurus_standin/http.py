"""The stand-in's wire protocol: HTTP API v4 as the YTsaurus HTTP proxy speaks it (docs: "HTTP proxy reference").

- Discovery: `GET /api` lists the versions, `GET /api/v4` the commands (name, input/output type, volatile,
  heavy), `GET /hosts` (`/hosts/<role>`, `?role=`) and `GET /api/v4/discover_proxies` (`{"proxies": [...]}`) the
  proxies of the requested role (every proxy here has the role `data`, YTsaurus' default); `GET /auth/whoami` the
  user.
- Proxies: every server is one proxy with its own sticky pool of tablet transactions (`sticky.StickyPool`), or the
  balancer, which serves each request (each, keep-alive or not) as a proxy picked at random.
- `/api/v4/<command>`: parameters in `X-YT-Parameters` (or, for volatile commands without input, the body),
  encoded as `X-YT-Header-Format` says (YSON text or JSON); rows in the `input_format` / `output_format` the
  parameters name; request bodies compressed as `Content-Encoding` says (identity, gzip).
- `Authorization: OAuth <token>`: a missing or wrong token gets 401 with an authentication error, as YTsaurus.
- Errors: a YTsaurus error object (code, message, attributes, inner errors) as JSON in `X-YT-Error` with its code
  in `X-YT-Response-Code`, status 400 (401 unauthenticated, 503 unavailable); a tabular or binary body is streamed
  chunked, so an error after the first bytes travels in the `X-YT-Error` trailer.
"""

from __future__ import annotations

import io
import json
import random
import ssl
import threading
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import islice
from typing import Any
from urllib.parse import parse_qs, urlparse

import yt.wrapper as yt
import yt.yson as yson

from streaming_core.cluster.errors import ClusterError
from streaming_core.cluster.ytsaurus.wire import arrow_insert, encode_wire, load_rows

from .acl import ROOT
from .commands import Commands, Rowset, Tabular, check_format_attributes
from .commands.common import transaction_id_of
from .errors import AUTHENTICATION_ERROR, GENERIC, UNAVAILABLE, BadRequest, error_object, from_exception
from .sticky import StickyPool

#: Rows per chunk of a streamed tabular response.
CHUNK_ROWS = 1024
#: Seconds a connection may stay silent before the stand-in drops it.
SOCKET_TIMEOUT_SECONDS = 60


@dataclass
class Fault:
    """An injected failure: the next `times` calls of `command` answer `status` with `code` (after `after_rows`
    rows of a streamed body, when given: the error then comes in the trailer)."""

    command: str
    status: int = 503
    code: int = UNAVAILABLE
    times: int = 1
    after_rows: int | None = None


@dataclass
class Served:
    """One request the stand-in answered: for tests that check what crossed the wire."""

    command: str
    tls: bool
    authorization: str | None
    status: int
    input_format: str | None = None
    #: The request's `path` parameter, if it has one.
    path: str | None = None
    #: The address of the proxy that served it (behind the balancer: the one it picked).
    proxy: str | None = None
    #: The transaction the request named (`transaction_id`; a started one's for `start_transaction`), if any.
    transaction: str | None = None


#: The role of every proxy of the stand-in (YTsaurus' default role of an HTTP proxy).
PROXY_ROLE = "data"


@dataclass
class ProxyState:
    """What the proxies of one stand-in share: the storage (`commands`), the token, what `/hosts` lists (the proxies'
    addresses), the injected faults and the record of what was served."""

    commands: Commands
    token: str | None
    heavy_proxies: list[str]
    tls: bool
    input_formats: tuple[str, ...] = ("yson", "json", "arrow")
    #: Tokens of users other than `root`, and whom each names (their permissions: `acl`).
    users: dict[str, str] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    served: list[Served] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take_fault(self, command: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.command == command and fault.times > 0:
                    fault.times -= 1
                    return fault
        return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ytsaurus-standin"
    timeout = SOCKET_TIMEOUT_SECONDS
    # Headers and body are two writes: with Nagle's algorithm the body would wait for the client's delayed ACK of the
    # headers (~40 ms a request on Linux). TCP_NODELAY sends it at once, as real proxies do.
    disable_nagle_algorithm = True
    state: ProxyState
    #: The proxies this server serves as: one (a proxy), or all of them (the balancer picks one per request).
    pools: tuple[StickyPool, ...]
    _input_format_name: str | None = None
    _request_path: str | None = None
    _transaction: str | None = None
    _pool: StickyPool

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test output is no place for an access log."""

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    # -- routing ----------------------------------------------------------------------------------------------

    def _dispatch(self) -> None:
        self._pool = random.choice(self.pools)
        url = urlparse(self.path)
        body = self._body()
        parts = url.path.strip("/").split("/")
        if parts == ["api"]:
            return self._json(200, ["v3", "v4"])
        if parts == ["api", "v4"]:
            return self._json(200, self.state.commands.descriptors())
        if parts[:1] == ["hosts"]:
            return self._json(200, self._proxies(parts[1] if len(parts) > 1 else parse_qs(url.query).get("role")))
        if parts == ["api", "v4", "discover_proxies"]:
            return self._json(200, {"proxies": self._proxies(parse_qs(url.query).get("role"))})
        if parts == ["ping"]:
            return self._json(200, {})
        if parts == ["auth", "whoami"]:
            login = self._user()
            if login is None:
                return self._unauthenticated("whoami")
            return self._json(200, {"login": login})
        if len(parts) == 3 and parts[:2] == ["api", "v4"]:
            return self._command(parts[2], body)
        if parts[:2] == ["api", "v3"]:
            return self._error(400, error_object(GENERIC, "the stand-in speaks API v4 only"), parts[-1])
        return self._error(404, error_object(GENERIC, f"no handler for {url.path}"), url.path)

    def _command(self, name: str, body: bytes) -> None:
        # the handler lives as long as its keep-alive connection
        self._input_format_name = self._request_path = self._transaction = None
        user = self._user()
        if user is None:
            return self._unauthenticated(name)
        entry = self.state.commands.handlers.get(name)
        if entry is None:
            return self._error(400, error_object(GENERIC, f"Command {name!r} is not registered"), name)
        descriptor, _ = entry
        try:
            params = self._params(descriptor.input_type is None and descriptor.is_volatile, body)
            self._request_path = None if params.get("path") is None else str(params["path"])
            self._transaction = transaction_id_of(params)
            fault = self.state.take_fault(name)
            if fault is not None and fault.after_rows is None:
                return self._error(fault.status, error_object(fault.code, f"injected fault in {name}"), name)
            self._pool.require(params)
            args: list[Any] = [params]
            if descriptor.input_type == "tabular":
                args.append(self._input_rows(params, _decompress(self, body)))
            elif descriptor.input_type == "structured":
                args.append(_node_format(params, "input_format").loads_node(_decompress(self, body)))
            elif descriptor.input_type == "binary":
                args.append(_decompress(self, body))
            result = self.state.commands.call(name, *args, proxy=self._pool.address, user=user)
            self._pool.follow(name, params, result)
            if name == "start_transaction":
                self._transaction = str(result["transaction_id"])
            if descriptor.output_type == "tabular":
                headers = {}
                if isinstance(result, Tabular):
                    headers["X-YT-Response-Parameters"] = self._header_value(result.parameters)
                    result = result.rows
                fmt = _row_format(params, "output_format")
                chunks = _encoded(result, fmt) if isinstance(result, Rowset) else _dumped(result, fmt)
                return self._stream(name, chunks, fault, headers)
            if descriptor.output_type == "binary":
                return self._stream(name, [result], fault=None)
            return self._structured(name, params, result)
        except KeyError as e:
            return self._error(400, from_exception(BadRequest(f"parameter {e.args[0]!r} is required"), name), name)
        except Exception as e:
            return self._error(400, from_exception(e, name), name)

    # -- requests ---------------------------------------------------------------------------------------------

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _proxies(self, role: str | list[str] | None) -> list[str]:
        """The proxies of `role` (any when None): YTsaurus lists none for a role no proxy has."""
        wanted = role[0] if isinstance(role, list) else role
        return list(self.state.heavy_proxies) if wanted in (None, PROXY_ROLE) else []

    def _user(self) -> str | None:
        """The user the request's token names (`root` for the stand-in's own token, or for any request when it has
        none), None when the token is missing or unknown."""
        given = self.headers.get("Authorization", "")
        users = {f"OAuth {token}": user for token, user in self.state.users.items()}
        if given in users:
            return users[given]
        if self.state.token is None or given == f"OAuth {self.state.token}":
            return ROOT
        return None

    def _unauthenticated(self, command: str) -> None:
        given = "Authorization" in self.headers
        message = "Error authenticating request" if given else "Client is missing credentials"
        self._error(401, error_object(AUTHENTICATION_ERROR, message), command)

    def _params(self, in_body: bool, body: bytes) -> dict[str, Any]:
        header_format = self.headers.get("X-YT-Header-Format", "<format=text>yson")
        text = body if in_body else self.headers.get("X-YT-Parameters", "").encode("iso-8859-1")
        if not text.strip():
            return {}
        if "json" in header_format and "yson" not in header_format:
            return dict(yson.json_to_yson(json.loads(text)))
        return dict(yson.loads(text))

    def _input_rows(self, params: Mapping[str, Any], body: bytes) -> Any:
        """The rows of a tabular request: Python rows from YSON or JSON, an Arrow table from `arrow` input."""
        spec = params.get("input_format")
        self._input_format_name = None if spec is None else str(spec)
        if self._input_format_name not in (None, *self.state.input_formats):
            raise BadRequest(f'Unsupported input format "{spec}"')
        if self._input_format_name == "arrow":
            path = str(params["path"])
            return arrow_insert.decode(self.state.commands.cluster.get_schema(path), body, path=path)
        return list(_row_format(params, "input_format").load_rows(io.BytesIO(body)))

    # -- responses --------------------------------------------------------------------------------------------

    def _record(self, command: str, status: int) -> None:
        fmt = self._input_format_name
        with self.state.lock:
            self.state.served.append(Served(command, self.state.tls, self.headers.get("Authorization"), status, fmt,
                                            self._request_path, self._pool.address, self._transaction))

    def _json(self, status: int, value: Any) -> None:
        self._send(status, json.dumps(value).encode(), "application/json")

    def _send(self, status: int, payload: bytes, content_type: str, headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("X-YT-Proxy", self._pool.address)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)

    def _error(self, status: int, error: dict[str, Any], command: str) -> None:
        self._record(command, status)
        text = json.dumps(error)
        self._send(status, text.encode(), "application/json",
                   {"X-YT-Error": text, "X-YT-Response-Code": str(error["code"])})

    def _structured(self, command: str, params: Mapping[str, Any], result: Any) -> None:
        self._record(command, 200)
        if result is None:
            return self._send(200, b"", "application/json")
        return self._send(200, _node_format(params, "output_format").dumps_node(result), "application/octet-stream")

    def _header_value(self, value: Any) -> str:
        """A value for a header, in the request's header format."""
        if "json" in self.headers.get("X-YT-Header-Format", "yson"):
            return json.dumps(yson.yson_to_json(value))
        return yson.dumps(value, yson_format="text").decode("iso-8859-1")

    def _stream(self, command: str, chunks: Iterable[bytes], fault: Fault | None,
                headers: Mapping[str, str] | None = None) -> None:
        """A chunked 200 whose errors, once the body has started, travel in the `X-YT-Error` trailer."""
        iterator = iter(chunks)
        try:
            first = next(iterator, b"")
        except (ClusterError, ValueError, TypeError) as e:
            return self._error(400, from_exception(e, command), command)
        self._record(command, 200)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Trailer", "X-YT-Error, X-YT-Response-Code")
        self.send_header("X-YT-Response-Code", "0")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        error: dict[str, Any] | None = None
        self._chunk(first)
        if fault is not None:
            error = error_object(fault.code, f"injected fault in {command} after the body started")
        else:
            try:
                for chunk in iterator:
                    self._chunk(chunk)
            except (ClusterError, ValueError, TypeError) as e:
                error = from_exception(e, command)
        self.wfile.write(b"0\r\n")
        if error is not None:
            self.wfile.write(f"X-YT-Error: {json.dumps(error)}\r\nX-YT-Response-Code: {error['code']}\r\n".encode())
        self.wfile.write(b"\r\n")

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")


def _encoded(rowset: Rowset, fmt: Any) -> Iterator[bytes]:
    """A rowset in the output format: binary YSON a column at a time (`yson` values in binary too, as YTsaurus'
    writer writes a stored value), any other format through Python rows."""
    binary = isinstance(fmt, yt.YsonFormat) and fmt.attributes.get("format") == "binary"
    for table in rowset.tables:
        wire = encode_wire(rowset.schema, table, binary_yson=True)
        if binary:
            yield wire
        else:
            out = io.BytesIO()
            fmt.dump_rows(load_rows(wire), out)
            yield out.getvalue()


def _dumped(rows: Iterable[Any], fmt: Any) -> Iterator[bytes]:
    iterator = iter(rows)
    while chunk := list(islice(iterator, CHUNK_ROWS)):
        out = io.BytesIO()
        fmt.dump_rows(chunk, out)
        yield out.getvalue()


def _row_format(params: Mapping[str, Any], key: str) -> Any:
    """The `yt.wrapper` format a parameter names; YSON with the wire attributes the stand-in speaks, or JSON."""
    spec = params.get(key)
    if spec is None:
        raise BadRequest(f"parameter {key!r} is required")
    name, attributes = str(spec), dict(getattr(spec, "attributes", {}) or {})
    if name == "yson":
        check_format_attributes(attributes)
        attributes.pop("require_yson_bindings", None)
        return yt.YsonFormat(attributes=attributes, require_yson_bindings=False)
    if name == "json":
        return yt.JsonFormat(attributes=attributes)
    raise BadRequest(f"{key} {name!r}: the stand-in serves yson and json")


def _node_format(params: Mapping[str, Any], key: str) -> Any:
    """The format of a structured value (JSON when the parameters name none, as the proxy's default)."""
    if key not in params:
        return yt.JsonFormat()
    return _row_format(params, key)


def _decompress(handler: BaseHTTPRequestHandler, body: bytes) -> bytes:
    encoding = (handler.headers.get("Content-Encoding") or "identity").lower()
    if encoding == "identity":
        return body
    if encoding == "gzip":
        return zlib.decompress(body, 32 + zlib.MAX_WBITS)  # gzip or zlib framing, as clients send either
    raise BadRequest(f"Content-Encoding {encoding!r}: the stand-in takes identity and gzip")


class StandinServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], state: ProxyState, context: ssl.SSLContext | None,
                 pools: tuple[StickyPool, ...] = ()) -> None:
        """A proxy with its own `StickyPool` (`pools` empty: made here, for the address bound), or the balancer
        over the proxies' `pools`."""
        handler = type("BoundHandler", (Handler,), {"state": state, "pools": pools})
        super().__init__(address, handler)
        self.address = f"{address[0]}:{self.server_address[1]}"
        if not pools:
            self.pool = StickyPool(self.address)
            handler.pools = (self.pool,)
        self.context = context

    def get_request(self) -> tuple[Any, Any]:
        sock, address = super().get_request()
        if self.context is not None:
            sock = self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that goes away or speaks plain HTTP to TLS is its own problem, not the server's."""
