"""opsd's HTTP endpoints, served on an ephemeral port and fetched over real sockets."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import requests
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from opsd.observe.readiness import ProgressPolicy, readiness_probe
from opsd.observe.status import StatusStore
from opsd.telemetry.http import HttpLimits, OpsHttpServer, PortInUseError, check_port_free
from opsd.telemetry.metrics import Metrics
from opsd.telemetry.redaction import REDACTED
from tests.support.wait import wait_until

NOW = 50_000.0


@pytest.fixture
def store() -> StatusStore:
    return StatusStore()


@pytest.fixture
def server(store: StatusStore) -> Iterator[OpsHttpServer]:
    metrics = Metrics(CollectorRegistry())
    metrics.input_rows.labels(query="clicks").inc(12)
    server = OpsHttpServer(
        metrics.render, status=store.to_json, host="127.0.0.1", port=0,
        readiness=readiness_probe(store, ProgressPolicy(min_window_seconds=60), lambda: NOW),
    )
    server.start()
    yield server
    server.stop()


def get(server: OpsHttpServer, path: str) -> requests.Response:
    return requests.get(server.url + path, timeout=5)


def test_ephemeral_port_is_bound_and_exposed(server: OpsHttpServer) -> None:
    assert server.port > 0
    assert server.url == f"http://127.0.0.1:{server.port}"


def test_metrics_serves_the_registry_in_prometheus_text_format(server: OpsHttpServer) -> None:
    response = get(server, "/metrics")

    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain")
    samples = {
        (s.name, tuple(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }
    assert samples[("opsd_input_rows_total", (("query", "clicks"),))] == 12


def test_healthz_answers_while_alive(server: OpsHttpServer) -> None:
    assert get(server, "/healthz").status_code == 200


def test_readyz_is_200_when_every_query_progresses(server: OpsHttpServer, store: StatusStore) -> None:
    store.update("clicks", active=True, started_at=NOW - 100, last_heartbeat_at=NOW - 1)

    response = get(server, "/readyz")

    assert response.status_code == 200
    assert response.json() == {"ready": True, "not_ready": [], "degraded": []}


def test_readyz_stays_200_and_lists_a_silent_query_as_degraded(server: OpsHttpServer, store: StatusStore) -> None:
    store.update("clicks", active=True, started_at=NOW - 500, last_heartbeat_at=NOW - 300)

    response = get(server, "/readyz")

    assert response.status_code == 200
    [reason] = response.json()["degraded"]
    assert (reason["query"], reason["reason"]) == ("clicks", "no_progress")


def test_readyz_is_503_while_a_query_is_not_brought_up(server: OpsHttpServer, store: StatusStore) -> None:
    store.update("clicks")

    response = get(server, "/readyz")

    assert response.status_code == 503
    assert response.json()["not_ready"] == [{"query": "clicks", "reason": "not_started", "detail": ""}]


def test_status_serves_the_store_as_json(server: OpsHttpServer, store: StatusStore) -> None:
    store.update("clicks", active=True, last_batch_id=9, max_rows_per_partition=1000)

    document = get(server, "/status").json()

    assert document["queries"]["clicks"]["last_batch_id"] == 9
    assert document["queries"]["clicks"]["max_rows_per_partition"] == 1000


def test_unknown_path_is_404(server: OpsHttpServer) -> None:
    response = get(server, "/nope")

    assert response.status_code == 404
    assert json.loads(response.text)["path"] == "/nope"


def test_stop_releases_the_port() -> None:
    first = OpsHttpServer(bytes, port=0)
    first.start()
    port = first.port
    first.stop()

    second = OpsHttpServer(bytes, port=port)
    try:
        assert second.port == port
    finally:
        second.stop()


def test_a_taken_port_is_named_by_the_check_and_by_the_server() -> None:
    taken = OpsHttpServer(lambda: b"")
    try:
        with pytest.raises(PortInUseError, match=f"^port {taken.port} on 127.0.0.1 is already in use$"):
            check_port_free("127.0.0.1", taken.port)
        with pytest.raises(PortInUseError) as caught:
            OpsHttpServer(lambda: b"", port=taken.port)
        assert caught.value.port == taken.port
    finally:
        taken.stop()
    check_port_free("127.0.0.1", taken.port)


# -- hostile clients: slow, half-sent, many, and secrets in the documents ---------------------------------------


def half_sent(server: OpsHttpServer, count: int) -> list[socket.socket]:
    """`count` connections that each send the start of a request and never finish it (slowloris)."""
    sockets = []
    for _ in range(count):
        s = socket.create_connection((server.host, server.port), timeout=5)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: opsd\r\n")
        sockets.append(s)
    return sockets


def closed_by_server(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.mark.hostile
def test_half_sent_requests_hold_no_thread_and_a_scrape_still_succeeds() -> None:
    metrics = Metrics(CollectorRegistry())
    metrics.input_rows.labels(query="clicks").inc(12)
    limits = HttpLimits(client_timeout_seconds=1.5, workers=2, max_connections=100)
    server = OpsHttpServer(metrics.render, port=0, limits=limits)
    threads_before = threading.active_count()
    server.start()
    held = half_sent(server, 300)
    try:
        # The loop thread and at most the workers: never one thread per connection.
        assert threading.active_count() <= threads_before + 1 + limits.workers
        started = time.monotonic()
        response = requests.get(server.url + "/metrics", timeout=5)
        assert response.status_code == 200 and "opsd_input_rows_total" in response.text
        assert time.monotonic() - started < 1.0, "the scrape waited for the slow clients"
        assert threading.active_count() <= threads_before + 1 + limits.workers
        # The slow clients are dropped: the oldest to make room at once, every one after the client timeout.
        for s in held:
            s.settimeout(limits.client_timeout_seconds + 3)
        assert all(closed_by_server(s) for s in held)
    finally:
        for s in held:
            s.close()
        server.stop()


@pytest.mark.hostile
def test_a_client_that_never_reads_its_answer_is_dropped_after_the_timeout() -> None:
    big = b"x" * 20_000_000  # more than the kernel's socket buffers take, so the server must wait for the reader
    server = OpsHttpServer(lambda: big, port=0, limits=HttpLimits(client_timeout_seconds=1.0, workers=1))
    server.start()
    lazy = socket.create_connection((server.host, server.port), timeout=5)
    lazy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        lazy.sendall(b"GET /metrics HTTP/1.1\r\nHost: opsd\r\n\r\n")
        wait_until(lambda: server.open_connections == 1, 5, "the request to be taken")
        wait_until(lambda: server.open_connections == 0, 5, "the server to drop the client that does not read")
        assert requests.get(server.url + "/healthz", timeout=5).text == "ok\n"
    finally:
        lazy.close()
        server.stop()


@pytest.mark.hostile
@pytest.mark.parametrize("request_head", [
    b"POST /metrics HTTP/1.1\r\nHost: opsd\r\nContent-Length: 0\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nX-Filler: " + b"a" * 20_000 + b"\r\n\r\n",
    b"\x00\xff garbage \x1b]0;title\x07\r\n\r\n",
], ids=["post", "huge-head", "garbage"])
def test_malformed_requests_get_an_error_and_leave_the_server_serving(server: OpsHttpServer,
                                                                      request_head: bytes) -> None:
    with socket.create_connection((server.host, server.port), timeout=5) as s:
        s.sendall(request_head)
        answer = s.recv(4096)
    assert answer.split(b" ", 2)[1] in (b"405", b"431")
    assert get(server, "/healthz").status_code == 200


@pytest.mark.hostile
def test_the_token_is_masked_in_status_readyz_and_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    token = "AQAD-status-secret-0123456789"
    monkeypatch.setenv("YT_TOKEN", token)
    metrics = Metrics(CollectorRegistry())
    metrics.input_rows.labels(query=f"q-{token}").inc()
    document = {"queries": {"clicks": {"exception": f"YtError: request with token {token} failed",
                                       "headers": {"Authorization": "OAuth x"}}}}
    server = OpsHttpServer(metrics.render, status=lambda: document, readiness=lambda: (False, document), port=0)
    server.start()
    try:
        bodies = {path: requests.get(server.url + path, timeout=5).text for path in ("/status", "/readyz", "/metrics")}
    finally:
        server.stop()
    assert {path: token in body for path, body in bodies.items()} == dict.fromkeys(bodies, False)
    status = json.loads(bodies["/status"])["queries"]["clicks"]
    assert status == {"exception": f"YtError: request with token {REDACTED} failed",
                      "headers": {"Authorization": REDACTED}}
