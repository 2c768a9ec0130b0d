"""opsd's HTTP endpoints, served on an ephemeral port and fetched over real sockets."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from opsd.observe.readiness import ProgressPolicy, readiness_probe
from opsd.observe.status import StatusStore
from opsd.telemetry.http import OpsHttpServer, PortInUseError, check_port_free
from opsd.telemetry.metrics import Metrics

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
