"""`opsd run CONFIG.yaml` as a real process on an embedded cluster: ready, delivers, `opsd status`, SIGTERM -> 0; a
second pipeline writes a queue in the sink's producer mode, and opsd sees its producer.

One daemon serves the tests of this module (a Spark session takes long to start on a busy machine); the
SIGTERM test comes last and ends it.
"""

from __future__ import annotations

import ipaddress
import json
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from streaming_core.cluster import connect
from streaming_core.options import DEFAULT_DYN_BATCH_SIZE
from tests.support.cluster import make_queue
from tests.support.daemon import START_SECONDS, WAIT_SECONDS, http_status, opsd, rows, run_daemon
from tests.support.ports import free_port
from tests.support.sink import COPY_SCHEMA, make_table, ordered_rows
from tests.support.wait import wait_until

pytestmark = pytest.mark.spark

QUEUE, CONSUMER, RESULT = "//home/e2e/queue", "//home/e2e/consumer", "//home/e2e/result"
PIPELINE = "copy"
#: The producer-mode pipeline: a queue into a queue through a queue producer.
PRODUCING, PRODUCER_QUEUE, PRODUCER_CONSUMER = "produce", "//home/e2e/p_queue", "//home/e2e/p_consumer"
PRODUCED, PRODUCER = "//home/e2e/p_result", "//home/e2e/producer"
EXIT_SECONDS = 90.0
INCUBATOR_NOTE = "WARNING: Using incubator modules: jdk.incubator.vector"


@dataclass
class Daemon:
    process: subprocess.Popen[bytes]
    url: str
    cluster_uri: str
    stderr: Path

    def result_rows(self) -> list[dict[str, Any]]:
        with connect(self.cluster_uri) as cluster:
            return ordered_rows(cluster, RESULT)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    work = tmp_path_factory.mktemp("daemon")
    cluster_uri = f"local://{work / 'cluster'}"
    with connect(cluster_uri) as cluster:
        make_queue(cluster, QUEUE, consumer=CONSUMER)
        make_table(cluster, RESULT, COPY_SCHEMA)
        cluster.insert_rows(QUEUE, rows(0, 200))
        make_queue(cluster, PRODUCER_QUEUE, consumer=PRODUCER_CONSUMER)
        make_table(cluster, PRODUCED, COPY_SCHEMA, tablets=2)
        cluster.insert_rows(PRODUCER_QUEUE, rows(0, 100))
    port = free_port()
    config = {
        "cluster": cluster_uri,
        "spark": {"master": "local[2]", "app_name": "opsd-e2e",
                  "conf": {"spark.sql.shuffle.partitions": 2}},
        "http": {"host": "127.0.0.1", "port": port},
        "checks": {"desync_seconds": 1, "lag_seconds": 1, "oom_risk_seconds": 2, "producers_seconds": 1},
        "pipelines": [{
            "name": PIPELINE,
            "source": {"format": "yt", "path": QUEUE, "options": {"consumer_path": CONSUMER,
                                                                   "max_rows_per_partition": 150}},
            "transform": {"sql": "SELECT data, n FROM source"},
            "sink": {"format": "yt", "path": RESULT},
            "trigger": {"processing_time": "1 second"},
            "checkpoint_location": str(work / "checkpoint"),
        }, {
            "name": PRODUCING,
            "source": {"format": "yt", "path": PRODUCER_QUEUE, "options": {"consumer_path": PRODUCER_CONSUMER}},
            "sink": {"format": "yt", "path": PRODUCED,
                     "options": {"producer_path": PRODUCER, "create_producer": True}},
            "trigger": {"processing_time": "1 second"},
            "checkpoint_location": str(work / "checkpoint-producer"),
        }],
    }
    config_file = work / "opsd.yaml"
    config_file.write_text(yaml.safe_dump(config))
    stderr = work / "stderr.log"
    process = run_daemon(config_file, stderr)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: process.poll() is not None or http_status(f"{url}/readyz") == 200, START_SECONDS,
                   "/readyz to answer 200")
        assert process.poll() is None, f"opsd run exited early:\n{stderr.read_text()[-3000:]}"
        yield Daemon(process, url, cluster_uri, stderr)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)


def test_ready_daemon_delivers_the_queued_rows(daemon: Daemon) -> None:
    wait_until(lambda: len(daemon.result_rows()) >= 200, WAIT_SECONDS, "200 rows in the result table")

    assert sorted(r["n"] for r in daemon.result_rows()) == list(range(200))


def status_of(daemon: Daemon, pipeline: str = PIPELINE) -> dict[str, Any]:
    with urllib.request.urlopen(f"{daemon.url}/status", timeout=5) as response:
        return json.load(response)["queries"][pipeline]


def test_opsd_sees_the_producer_of_a_pipeline_in_producer_mode(daemon: Daemon) -> None:
    """Its sessions (one per source partition, named by the checkpoint, with the batch each wrote last), the epochs a
    second batch bumped, on `/status` and the metrics; the producer is healthy."""
    def produced() -> list[dict[str, Any]]:
        with connect(daemon.cluster_uri) as cluster:
            return ordered_rows(cluster, PRODUCED)

    wait_until(lambda: len(produced()) >= 100, WAIT_SECONDS, "100 rows in the produced queue")
    with connect(daemon.cluster_uri) as cluster:
        cluster.insert_rows(PRODUCER_QUEUE, rows(100, 50))
    wait_until(lambda: len(produced()) >= 150, WAIT_SECONDS, "150 rows in the produced queue")

    def producer() -> dict[str, Any]:
        return status_of(daemon, PRODUCING).get("producers") or {}

    wait_until(lambda: producer().get("epoch_total", 0) >= 1, WAIT_SECONDS, "the second batch's epoch bump")
    found = producer()
    assert found["state"] == "ok" and found["producer"] == PRODUCER and found["queue"] == PRODUCED
    assert found["sessions"] and max(s["batch_id"] for s in found["sessions"]) == 1
    assert found["counted"]["epoch_bumps"] == found["epoch_total"] and found["fenced_zombies"] == 0
    assert sorted(r["n"] for r in produced()) == list(range(150)), "every row once"
    with urllib.request.urlopen(f"{daemon.url}/metrics", timeout=10) as response:
        text = response.read().decode()
    assert f'opsd_producer_sessions{{query="{PRODUCING}"}} {len(found["sessions"])}.0' in text


def test_the_idle_pipelines_lagging_consumer_is_healed_and_the_doctor_finds_it_healthy(daemon: Daemon) -> None:
    def healed() -> bool:
        with connect(daemon.cluster_uri) as cluster:
            return sum(cluster.get_consumer_offsets(CONSUMER, QUEUE).values()) == 200

    wait_until(healed, WAIT_SECONDS, "the consumer of the idle pipeline healed to the end of its last batch")
    wait_until(lambda: (status_of(daemon).get("desync") or {}).get(QUEUE, {}).get("state") == "in_sync",
               WAIT_SECONDS, "/status to show the queue in sync")

    desync, lag = status_of(daemon)["desync"][QUEUE], status_of(daemon)["lag"]
    assert desync["last_heal"]["outcome"] == "healed" and lag["backlog_rows"] == 0
    doctor = opsd("doctor", "--url", daemon.url)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr


def test_status_prints_each_pipeline_with_its_state(daemon: Daemon) -> None:
    result = opsd("status", "--url", daemon.url)

    assert result.returncode == 0, result.stderr
    # 200 columns (`tests.support.daemon.opsd`): the table, with the pipeline's row
    assert "opsd pipelines" in result.stdout
    assert [line for line in result.stdout.splitlines() if line.split()[:2] == [PIPELINE, "running"]]


def test_status_json_prints_the_status_document(daemon: Daemon) -> None:
    result = opsd("status", "--url", daemon.url, "--json")

    assert result.returncode == 0, result.stderr
    pipeline = json.loads(result.stdout)["queries"][PIPELINE]
    assert pipeline["active"] is True and pipeline["trigger_interval_seconds"] == 1.0
    assert (pipeline["max_rows_per_partition"], pipeline["dyn_batch_size"]) == (150, DEFAULT_DYN_BATCH_SIZE)


def test_logs_are_json_lines_with_one_batch_event_per_micro_batch_and_no_chatter(daemon: Daemon) -> None:
    with urllib.request.urlopen(f"{daemon.url}/status", timeout=5) as response:
        batches = json.load(response)["queries"][PIPELINE]["last_batch_id"] + 1

    def logged() -> list[dict[str, Any]]:
        return [json.loads(line) for line in daemon.stderr.read_text().splitlines() if line.startswith("{")]

    def completed_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [e for e in events if e["event"] == "batch_completed" and e["query"] == PIPELINE]

    wait_until(lambda: len(completed_of(logged())) >= batches, WAIT_SECONDS, f"{batches} batch events")
    lines = daemon.stderr.read_text().splitlines()
    # The JVM itself (not log4j) says which incubator modules it loaded, before any configuration applies.
    assert [line for line in lines if not line.startswith("{")] in ([], [INCUBATOR_NOTE]), lines[:5]
    events = logged()
    completed = completed_of(events)
    assert [e["batch_id"] for e in completed][:batches] == list(range(batches))
    assert {"query", "rows", "duration_seconds", "backlog_rows", "timestamp"} <= set(completed[0])
    assert sum(e["rows"] for e in completed) >= 200
    assert [e for e in events if e["logger"].startswith("apscheduler") and e["level"] == "info"] == []
    assert all(set(e) >= {"event", "level", "logger", "timestamp"} for e in events), "one shape for every line"
    assert all(e["level"] != "info" for e in events if e["logger"].startswith("org.apache")), "Spark at WARN"


def test_the_oom_check_judges_the_next_batch_from_the_spark_ui(daemon: Daemon) -> None:
    """opsd's session keeps the Spark UI on; the OOM check reads its peaks and exports each pool's risk."""
    def heap_risk() -> float | None:
        with urllib.request.urlopen(f"{daemon.url}/metrics", timeout=10) as response:
            text = response.read().decode()
        found = [line for line in text.splitlines()
                 if line.startswith(f'opsd_oom_risk{{pool="jvm_heap",query="{PIPELINE}"}}')
                 or line.startswith(f'opsd_oom_risk{{query="{PIPELINE}",pool="jvm_heap"}}')]
        return float(found[0].rsplit(" ", 1)[1]) if found else None

    wait_until(lambda: heap_risk() is not None, WAIT_SECONDS, "opsd_oom_risk of the pipeline's heap")
    assert 0.0 < heap_risk() < 1.0
    with urllib.request.urlopen(f"{daemon.url}/status", timeout=10) as response:
        ui = json.load(response)["spark_ui"]
    with urllib.request.urlopen(f"{ui}/api/v1/applications", timeout=10) as response:
        assert json.load(response), "/status names the Spark UI the session serves"


def non_loopback_address() -> str | None:
    """An address of this host other than loopback (the one its default route leaves from), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the route
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if address.startswith("127.") else address


@pytest.mark.hostile
def test_the_spark_ui_listens_on_loopback_keeps_the_streaming_tab_and_has_no_kill_buttons(daemon: Daemon) -> None:
    with urllib.request.urlopen(f"{daemon.url}/status", timeout=10) as response:
        ui = urlparse(json.load(response)["spark_ui"])
    assert ipaddress.ip_address(socket.gethostbyname(ui.hostname)).is_loopback, ui.hostname
    assert http_status(f"{ui.geturl()}/api/v1/applications") == 200, "the REST API the OOM check reads"
    assert http_status(f"{ui.geturl()}/StreamingQuery/") == 200, "the Structured Streaming tab"
    assert http_status(f"{ui.geturl()}/jobs/") == 200
    # The kill buttons are off in the running application (its kill handlers then refuse every request).
    with urllib.request.urlopen(f"{ui.geturl()}/api/v1/applications", timeout=10) as response:
        [app] = json.load(response)
    with urllib.request.urlopen(f"{ui.geturl()}/api/v1/applications/{app['id']}/environment", timeout=10) as response:
        properties = dict(json.load(response)["sparkProperties"])
    assert properties["spark.ui.killEnabled"] == "false"
    other = non_loopback_address()
    if other is not None:
        with pytest.raises(OSError):
            socket.create_connection((other, ui.port), timeout=3).close()


def test_sigterm_stops_gracefully_with_exit_0_and_every_row_delivered_once(daemon: Daemon) -> None:
    with connect(daemon.cluster_uri) as cluster:
        cluster.insert_rows(QUEUE, rows(200, 300))
    wait_until(lambda: len(daemon.result_rows()) >= 500, WAIT_SECONDS, "500 rows in the result table")

    daemon.process.send_signal(signal.SIGTERM)
    code = daemon.process.wait(EXIT_SECONDS)

    assert code == 0, daemon.stderr.read_text()[-3000:]
    assert sorted(r["n"] for r in daemon.result_rows()) == list(range(500))
    events = [json.loads(line)["event"] for line in daemon.stderr.read_text().splitlines() if line.startswith("{")]
    assert events.index("pipeline_stopped") < events.index("opsd_stopped")
    assert http_status(f"{daemon.url}/healthz") is None, "the endpoint is gone"


def test_ctrl_c_stops_gracefully_with_exit_130_and_no_error(tmp_path: Path) -> None:
    """PySpark's own SIGINT handler (cancel every job, raise KeyboardInterrupt) must not replace opsd's."""
    config_file = tmp_path / "opsd.yaml"
    config_file.write_text(yaml.safe_dump({
        "cluster": f"local://{tmp_path / 'cluster'}", "spark": {"master": "local[1]"}, "http": {"port": 0},
        "pipelines": [{"name": "rate", "source": {"format": "rate"}, "sink": {"format": "memory"},
                       "trigger": {"processing_time": "1 second"}}]}))
    stderr = tmp_path / "stderr.log"

    def events() -> list[str]:
        return [json.loads(line)["event"] for line in stderr.read_text().splitlines() if line.startswith("{")]

    process = run_daemon(config_file, stderr)
    try:
        wait_until(lambda: process.poll() is not None or "batch_completed" in events(), START_SECONDS, "a batch")
        process.send_signal(signal.SIGINT)
        code = process.wait(EXIT_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
    text = stderr.read_text()

    assert code == 130, text[-3000:]
    assert "opsd: error" not in text and "Traceback" not in text, text[-3000:]
    assert events().index("pipeline_stopped") < events().index("opsd_stopped"), "the daemon's own graceful stop"


def test_config_errors_name_the_file_every_pipeline_and_field(tmp_path: Path) -> None:
    config_file = tmp_path / "broken.yaml"
    config_file.write_text(yaml.safe_dump({"pipelines": [
        {"name": "clicks", "source": {"format": "rate"}, "sink": {"format": "kafka"}},
        {"name": "orders", "source": {"format": "rate"}, "sink": {"format": "console"},
         "trigger": {"processing_time": "soon"}},
    ]}))

    result = opsd("run", str(config_file))

    assert result.returncode == 1
    assert str(config_file) in result.stderr
    assert "pipeline 'clicks' (pipelines[0]): sink.format" in result.stderr
    assert "pipeline 'orders' (pipelines[1]): trigger" in result.stderr
    assert "Traceback" not in result.stderr


def test_status_without_a_daemon_is_a_clear_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"

    result = opsd("status", "--url", url)

    assert result.returncode == 1
    assert result.stderr.startswith(f"opsd: error: no opsd daemon answers at {url}")
