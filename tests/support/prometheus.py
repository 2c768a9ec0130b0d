"""Prometheus' binaries for tests: a real server (`prometheus`, scraping `opsd_server`) and `query_until_present`;
`promtool` and `needs_promtool`, the rule checker. Loaded as a pytest plugin by `conftest.py`; a module may override
`opsd_server` with its own. A test using the `prometheus` fixture is marked `prometheus` by `conftest.py`."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests
import yaml
from prometheus_client import CollectorRegistry

from opsd.telemetry.http import OpsHttpServer
from opsd.telemetry.metrics import Metrics
from tests.support.ports import free_port

PROMETHEUS = shutil.which("prometheus")
QUERY_TIMEOUT_SECONDS = 30.0


def needs_promtool(test: Callable[..., None]) -> Callable[..., None]:
    """Marks a test that runs `promtool`: `prometheus`, and skipped where the binary is missing."""
    missing = shutil.which("promtool") is None
    reason = "promtool not on PATH (Debian package prometheus; `make test` installs it)"
    return pytest.mark.prometheus(pytest.mark.skipif(missing, reason=reason)(test))


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    """Run promtool and keep its output for the assertion message."""
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
def opsd_server() -> Iterator[OpsHttpServer]:
    metrics = Metrics(CollectorRegistry())
    metrics.input_rows.labels(query="clicks").inc(1234)
    metrics.source_backlog_rows.labels(query="clicks", queue="//home/q", partition="0").set(56)
    server = OpsHttpServer(metrics.render, host="127.0.0.1", port=0)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def prometheus(tmp_path: Path, opsd_server: OpsHttpServer) -> Iterator[str]:
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {"job_name": "opsd", "static_configs": [{"targets": [f"127.0.0.1:{opsd_server.port}"]}]}
        ],
    }
    config_file = tmp_path / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(config))
    address = f"127.0.0.1:{free_port()}"
    log_file = (tmp_path / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [
            str(PROMETHEUS),
            f"--config.file={config_file}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address={address}",
        ],
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    try:
        yield f"http://{address}"
    finally:
        process.kill()
        process.wait(10)
        log_file.close()


def query_until_present(base_url: str, promql: str) -> list[dict]:
    """Poll the query API until the series exists (first scrape), within QUERY_TIMEOUT_SECONDS."""
    deadline = time.monotonic() + QUERY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        try:
            response = requests.get(f"{base_url}/api/v1/query", params={"query": promql}, timeout=2)
            result = response.json()["data"]["result"] if response.ok else []
        except requests.ConnectionError:
            result = []  # Prometheus is still starting.
        if result:
            return result
        time.sleep(0.5)
    pytest.fail(f"Prometheus returned no {promql} within {QUERY_TIMEOUT_SECONDS:.0f} s")
