"""`opsd run` against YTsaurus: a pipeline over the YTsaurus backend, through the real client over HTTPS against the
stand-in's balancer with its proxies behind it (`tests.support.standin.tls_proxy`, the CA bundle named in the cluster
URI), with the token only in the daemon's `YT_TOKEN`.

The checkpoint is a `yt:///` location in the stand-in's Cypress: SPYT's file system, which writes it on a real
cluster, cannot run here, so the session maps `yt:///` onto the stand-in's storage root (Hadoop's overload scheme,
as on the embedded cluster); opsd reads it back over HTTP (`list`, `exists`, `read_file`). Every check that reads
the cluster — desync (and its heal), lag, OOM risk, the auto-tuner and the trim forecast (the Queue Agent's automatic
trimming switched on, the pipeline's consumer vital) — runs against it, and `opsd history` reads their decisions back
from the cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from opsd.cli.main import main
from opsd.results.trim import TrimOutlook
from streaming_core.cluster import connect
from streaming_core.cluster.ytsaurus.queues import QUEUE_AGENT_CONFIG
from streaming_core.session import CHECKPOINT_FILE_MANAGER
from streaming_core.tuning import Tuning, read_tuning
from tests.support.cluster import make_queue
from tests.support.daemon import START_SECONDS, http_status, run_daemon
from tests.support.ports import free_port
from tests.support.sink import COPY_SCHEMA, make_table, ordered_rows
from tests.support.standin import STANDIN_TOKEN, tls_proxy
from tests.support.wait import wait_until
from ytsaurus_standin import StandinProxy

pytestmark = pytest.mark.spark

QUEUE, CONSUMER, RESULT = "//home/yt-e2e/queue", "//home/yt-e2e/consumer", "//home/yt-e2e/result"
CHECKPOINT = "yt:///home/yt-e2e/checkpoint"
PIPELINE = "copy"
#: How long this pipeline (over HTTPS to the stand-in) is waited for: more than `tests.support.daemon.WAIT_SECONDS`.
WAIT_SECONDS = 150.0
#: Rows the Queue Agent keeps of each partition below the vital consumer.
RETAINED_ROWS = 30
#: The tuner's bounds (not its defaults, so that a cap within them shows the config's were applied), low and high:
#: rows per partition, bytes per partition (data weight), rows per insert call.
ROW_BOUNDS, BYTE_BOUNDS, DYN_BATCH_BOUNDS = (10, 100_000), (2 << 20, 512 << 20), (2000, 80_000)


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandinProxy]:
    with tls_proxy(tmp_path_factory.mktemp("yt-daemon-tls"), token=STANDIN_TOKEN, auto_trim_seconds=1) as (proxy, _):
        yield proxy


@pytest.fixture(scope="module")
def daemon(standin, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    work = tmp_path_factory.mktemp("yt-daemon")
    with connect(standin.uri, token=STANDIN_TOKEN) as cluster:
        make_queue(cluster, QUEUE)
        cluster.create_consumer(CONSUMER, recursive=True)
        cluster.register_queue_consumer(QUEUE, CONSUMER, vital=True)
        cluster.set(f"{QUEUE}/@auto_trim_config", {"enable": True, "retained_rows": RETAINED_ROWS})
        cluster.set(QUEUE_AGENT_CONFIG, {"queue_agent": {"controller": {"enable_automatic_trimming": True}}})
        make_table(cluster, RESULT, COPY_SCHEMA)
        cluster.insert_rows(QUEUE, [{"data": f"row-{i}", "n": i} for i in range(200)])
    port = free_port()
    config = {
        "cluster": standin.uri,
        "spark": {"master": "local[2]", "app_name": "opsd-yt-e2e", "conf": {
            "spark.sql.shuffle.partitions": 2,
            "spark.hadoop.fs.yt.impl": "org.apache.hadoop.fs.viewfs.ViewFileSystemOverloadScheme",
            "spark.hadoop.fs.viewfs.mounttable.default.linkFallback": f"file://{standin.root}",
            "spark.hadoop.fs.yt.impl.disable.cache": "true",
            "spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_FILE_MANAGER}},
        "http": {"host": "127.0.0.1", "port": port},
        "checks": {"desync_seconds": 1, "lag_seconds": 1, "oom_risk_seconds": 2, "autotune_seconds": 2,
                   "retention_seconds": 1},
        "pipelines": [{
            "name": PIPELINE,
            "source": {"format": "yt", "path": QUEUE, "options": {"consumer_path": CONSUMER,
                                                                   "max_rows_per_partition": 20}},
            "sink": {"format": "yt", "path": RESULT},
            "trigger": {"processing_time": "1 second"},
            "checkpoint_location": CHECKPOINT,
            "autotune": {"mode": "apply", "min_rows_per_partition": ROW_BOUNDS[0],
                         "max_rows_per_partition": ROW_BOUNDS[1], "min_bytes_per_partition": BYTE_BOUNDS[0],
                         "max_bytes_per_partition": BYTE_BOUNDS[1], "min_dyn_batch_size": DYN_BATCH_BOUNDS[0],
                         "max_dyn_batch_size": DYN_BATCH_BOUNDS[1]},
        }],
    }
    config_file = work / "opsd.yaml"
    config_file.write_text(yaml.safe_dump(config))
    stderr = work / "stderr.log"
    process = run_daemon(config_file, stderr, env={**os.environ, "YT_TOKEN": STANDIN_TOKEN})
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: process.poll() is not None or http_status(f"{url}/readyz") == 200, START_SECONDS,
                   "/readyz to answer 200")
        assert process.poll() is None, f"opsd run exited early:\n{stderr.read_text()[-3000:]}"
        yield url, stderr, config_file
    finally:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()


def status(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/status", timeout=5) as response:
        return json.load(response)["queries"][PIPELINE]


def metrics(url: str) -> str:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        return response.read().decode()


def assert_within_bounds(tuned: Tuning) -> None:
    """Every cap the tuner wrote lies within the configured bounds (a row cap it wrote is not the option's 20)."""
    assert tuned.max_rows_per_partition is None or (
        ROW_BOUNDS[0] <= tuned.max_rows_per_partition <= ROW_BOUNDS[1] and tuned.max_rows_per_partition != 20), tuned
    assert tuned.max_bytes_per_partition is None or (
        BYTE_BOUNDS[0] <= tuned.max_bytes_per_partition <= BYTE_BOUNDS[1]), tuned
    assert tuned.dyn_batch_size is None or DYN_BATCH_BOUNDS[0] <= tuned.dyn_batch_size <= DYN_BATCH_BOUNDS[1], tuned


def test_a_pipeline_over_ytsaurus_delivers_and_every_check_reads_the_cluster(daemon, standin, capsys,
                                                                             monkeypatch) -> None:
    url, stderr, config_file = daemon
    with connect(standin.uri, token=STANDIN_TOKEN) as cluster:
        wait_until(lambda: len(ordered_rows(cluster, RESULT)) >= 200, WAIT_SECONDS, "200 rows in the result table")
        assert sorted(r["n"] for r in ordered_rows(cluster, RESULT)) == list(range(200))

        # desync reads the yt:/// checkpoint over HTTP and heals the idle query's lagging consumer
        wait_until(lambda: sum(cluster.get_consumer_offsets(CONSUMER, QUEUE).values()) == 200, WAIT_SECONDS,
                   "the idle pipeline's consumer healed to the end of its last batch")
        wait_until(lambda: (status(url).get("desync") or {}).get(QUEUE, {}).get("state") == "in_sync",
                   WAIT_SECONDS, "/status to show the queue in sync")
        assert status(url)["desync"][QUEUE]["last_heal"]["outcome"] == "healed"
        # lag: the backlog of the queue as the cluster counts it
        assert status(url)["lag"]["backlog_rows"] == 0
        # the auto-tuner wrote its decision in the tuning document the source reads through the stand-in: the byte
        # cap (memory), the row cap (batch duration: which way depends on this machine's speed), or both, and
        # whichever it wrote lies within the configured bounds; a row cap that does not bind stays in the options
        wait_until(lambda: (doc := read_tuning(cluster, f"{CONSUMER}_tuning")).reason.startswith("autotune:") and (
            doc.max_bytes_per_partition or doc.max_rows_per_partition), WAIT_SECONDS, "the tuner's cap in the document")
        assert_within_bounds(read_tuning(cluster, f"{CONSUMER}_tuning"))
        # the trim forecast: the Queue Agent trims up to the vital consumer, keeping the retained rows, and never
        # deletes a row the query has not read (its own consumer holds them)
        wait_until(lambda: all(i.trimmed_row_count == i.total_row_count - RETAINED_ROWS
                               for i in cluster.get_tablet_infos(QUEUE)), WAIT_SECONDS, "the Queue Agent's trim")
        wait_until(lambda: (status(url).get("trim") or {}).get(QUEUE), WAIT_SECONDS, "/status to show the forecast")
        trim = status(url)["trim"][QUEUE]
        assert trim["auto_trim_config"] == {"enable": True, "retained_rows": RETAINED_ROWS}
        assert {p["outlook"] for p in trim["partitions"].values()} == {TrimOutlook.CONSUMER_VITAL}
    # history: the heal and the tuner's decisions, read back from the cluster with the daemon's config
    monkeypatch.setenv("YT_TOKEN", STANDIN_TOKEN)
    capsys.readouterr()
    assert main(["history", PIPELINE, "--config", str(config_file), "--json"]) == 0
    decided = {(e["kind"], e["outcome"]) for e in json.loads(capsys.readouterr().out)}
    assert ("heal", "healed") in decided and "tuner" in {kind for kind, _ in decided}, decided
    # OOM risk: the next batch judged from the Spark UI's peaks, with bytes per row sampled through the stand-in
    wait_until(lambda: 'pool="jvm_heap"' in metrics(url) and "opsd_oom_risk{" in metrics(url), WAIT_SECONDS,
               "opsd_oom_risk of the pipeline")
    with connect(standin.uri, token=STANDIN_TOKEN) as cluster:  # later cycles kept their caps within bounds
        assert_within_bounds(read_tuning(cluster, f"{CONSUMER}_tuning"))
    served = {s.command for s in standin.served}
    assert {"pull_consumer", "advance_consumer", "read_file", "list", "get_tablet_infos", "insert_rows",
            "set"} <= served, served
    text = stderr.read_text()
    assert STANDIN_TOKEN not in text and "Traceback" not in text
    assert all(s.tls for s in standin.served), "every request crossed TLS"
