"""`opsd run` with a pipeline that can never start: pre-flight refuses it (no restart loop), the daemon keeps the
others running and says why on /readyz, /status and /metrics; `opsd run --check` finds the same without starting.
A pipeline whose batch fails (its rows were trimmed before it read them) is one `query_failed` line above DEBUG, with
Spark's whole trace at DEBUG only."""

from __future__ import annotations

import json
import re
import signal
import urllib.request
from pathlib import Path

import pytest
import yaml

from streaming_core.cluster import connect
from tests.support.cluster import make_queue
from tests.support.daemon import START_SECONDS, WAIT_SECONDS, http_status, opsd, rows, run_daemon
from tests.support.ports import free_port
from tests.support.sink import COPY_SCHEMA, make_table, ordered_rows
from tests.support.wait import wait_until

pytestmark = pytest.mark.spark

QUEUE, CONSUMER, RESULT, MISSING = "//home/f/queue", "//home/f/consumer", "//home/f/result", "//home/f/missing"
TRIMMED_QUEUE, TRIMMED_CONSUMER = "//home/f/trimmed", "//home/f/trimmed_consumer"
#: Each query reads through its own consumer (two sharing one are refused: one would move the other's rows).
BROKEN_CONSUMER = "//home/f/broken_consumer"


def test_a_pipeline_that_can_never_start_is_refused_and_named_while_the_others_run(tmp_path: Path) -> None:
    cluster_uri = f"local://{tmp_path / 'cluster'}"
    with connect(cluster_uri) as cluster:
        make_queue(cluster, QUEUE, consumer=CONSUMER)
        cluster.create_consumer(BROKEN_CONSUMER)
        cluster.register_queue_consumer(QUEUE, BROKEN_CONSUMER)
        make_table(cluster, RESULT, COPY_SCHEMA)
        cluster.insert_rows(QUEUE, rows(0, 100))
        # Rows trimmed past the consumer before the pipeline reads them: its first batch fails in the Python worker.
        make_queue(cluster, TRIMMED_QUEUE, partitions=1, consumer=TRIMMED_CONSUMER)
        cluster.insert_rows(TRIMMED_QUEUE, rows(0, 100))
        cluster.trim_rows(TRIMMED_QUEUE, 0, 50, past_vital_consumers=True)
    port = free_port()

    def pipeline(name: str, sink: str, queue: str = QUEUE, consumer: str = CONSUMER) -> dict:
        return {"name": name, "source": {"path": queue, "options": {"consumer_path": consumer}},
                "sink": {"format": "yt", "path": sink}, "trigger": {"processing_time": "1 second"},
                "checkpoint_location": str(tmp_path / f"cp-{name}")}

    config_file = tmp_path / "opsd.yaml"
    config_file.write_text(yaml.safe_dump({
        "cluster": cluster_uri, "http": {"port": port},
        "spark": {"master": "local[2]", "conf": {"spark.ui.showConsoleProgress": False}},
        "pipelines": [pipeline("good", RESULT), pipeline("broken", MISSING, consumer=BROKEN_CONSUMER),
                      pipeline("trimmed", RESULT, TRIMMED_QUEUE, TRIMMED_CONSUMER)]}))

    check = opsd("run", "--check", str(config_file), timeout=180)
    assert check.returncode == 1, check.stderr[-2000:]
    assert f"pipeline 'broken': sink: {MISSING}" in check.stdout and "pipeline 'good'" not in check.stdout

    stderr = tmp_path / "stderr.log"
    process = run_daemon(config_file, stderr, options=["--log-level", "DEBUG"])
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: process.poll() is not None or http_status(f"{url}/metrics") == 200, START_SECONDS,
                   "the endpoint to answer")
        with connect(cluster_uri) as cluster:
            wait_until(lambda: len(ordered_rows(cluster, RESULT)) >= 100, WAIT_SECONDS, "the good pipeline's rows")
        wait_until(lambda: opsd_json(f"{url}/status")["queries"].get("trimmed", {}).get("permanent_failure"),
                   WAIT_SECONDS, "the trimmed pipeline's batch to fail")
        assert process.poll() is None, "a refused pipeline keeps the daemon up, its failure visible"
        readiness = opsd_json(f"{url}/readyz")  # 200: the pod stays in its Service, its metrics scraped
        assert readiness["ready"] and sorted((d["query"], d["reason"]) for d in readiness["degraded"]) == [
            ("broken", "failed_permanently"), ("trimmed", "failed_permanently")]
        status = opsd_json(f"{url}/status")["queries"]["broken"]
        assert MISSING in status["permanent_failure"] and status["restarts"] == 0
        with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
            assert 'opsd_query_failed_permanently{query="broken"} 1.0' in response.read().decode()

        process.send_signal(signal.SIGTERM)
        assert process.wait(90) == 1, "a pipeline failed for good: the daemon's exit says so"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)
    events = [json.loads(line) for line in stderr.read_text().splitlines() if line.startswith("{")]
    refused = [e for e in events if e["event"] == "pipeline_preflight_failed"]
    assert [e["query"] for e in refused] == ["broken"] and MISSING in refused[0]["problems"][0]
    assert not [e for e in events if e["event"] == "query_restarted"]

    # One failed batch, one line above DEBUG: the product's error and what it is about, no Java stack (Spark's own
    # seven lines about the task are held back); the whole trace is the one DEBUG line after it.
    above_debug = [line for line in stderr.read_text().splitlines()  # and whatever else a child printed
                   if not (line.startswith("{") and json.loads(line)["level"] == "debug")]
    naming = [json.loads(line) for line in above_debug if "TrimmedRowsError" in line]
    assert [(e["event"], e["query"]) for e in naming] == [("query_failed", "trimmed")], naming
    assert naming[0]["error"].startswith("TrimmedRowsError: //home/f/trimmed: partition 0, rows [0, 50) of the "
                                         "requested range [0, 100) were trimmed before they were read: 50 rows lost")
    seek = "(opsd consumer seek //home/f/trimmed //home/f/trimmed_consumer --partition 0 --to trim)"
    assert seek in naming[0]["error"], "the way out is named on the one line"
    # Neither Spark's Java frames nor the failure's Python traceback (its `raise` line), in JSON or raw from a child.
    assert not [line for line in above_debug if "\tat org.apache" in line or "\\tat org.apache" in line
                or RAISED.search(line)], [line for line in above_debug if not line.startswith("{")]
    traces = [e for e in events if e["event"] == "query_failure_trace"]
    assert [(e["level"], e["query"]) for e in traces] == [("debug", "trimmed")]
    assert "\tat org.apache.spark" in traces[0]["exception"]
    assert "Traceback (most recent call last)" in traces[0]["exception"]
    assert RAISED.search(traces[0]["exception"])


#: The `raise` line of the failure's Python traceback: when the batch is planned (the rows were trimmed before) or
#: when it is read (trimmed meanwhile).
RAISED = re.compile(r"raise (trimmed_error\(|TrimmedRowsError)")


def opsd_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)
