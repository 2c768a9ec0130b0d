"""`opsd doctor`: per query the facts and plain advice, for a checkpoint, a config file or a running daemon; exit 0
healthy, 1 needs action, 2 the doctor failed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from opsd.observe.recorder import Recorder
from opsd.observe.results import PartitionLag, QueryLag
from opsd.observe.status import StatusStore
from opsd.telemetry.http import OpsHttpServer
from opsd.telemetry.metrics import Metrics
from tests.support.checkpoint import job_with_checkpoint
from tests.support.doctor import doctor
from tests.support.ports import free_port


@pytest.fixture
def job(yt, yt_root: str, tmp_path: Path) -> tuple[str, str, str]:
    """A queue of 2 x 20 rows, its consumer, and a checkpoint whose committed batch 1 read everything."""
    return job_with_checkpoint(yt, yt_root, tmp_path / "cp", {0: {0: 9, 1: 9}, 1: {0: 19, 1: 19}}, committed=1)


def test_an_idle_query_one_batch_behind_is_healthy_with_the_heal_as_advice(yt, job, cluster_uri, capsys) -> None:
    q, c, location = job
    for p in (0, 1):
        yt.advance_consumer(c, q, p, None, 10)

    code, report = doctor(capsys, "--checkpoint", location, "--cluster", cluster_uri, "--json")

    facts = report["queries"][location]["facts"]
    assert (code, report["healthy"]) == (0, True)
    assert facts["desync"][q]["state"] == "lagging_one_batch" and facts["lag"]["backlog_rows"] == 0
    [finding] = report["queries"][location]["findings"]
    assert finding["severity"] == "info" and finding["advice"] == (
        f"heal it (opsd desync heal --checkpoint {location} --cluster {cluster_uri})")


@pytest.mark.parametrize(("consumer", "trim", "advice"), [
    ({0: 20, 1: 25}, None, "move the consumer back to the checkpoint"),
    ({0: 20, 1: 20}, 25, "--partition 1 --to trim"),
])
def test_a_consumer_ahead_or_a_checkpoint_behind_the_trim_needs_action(yt, job, cluster_uri, capsys, consumer,
                                                                       trim, advice) -> None:
    q, c, location = job
    yt.insert_rows(q, [{"data": "x", "n": i} for i in range(20)])
    for p, offset in consumer.items():
        yt.advance_consumer(c, q, p, None, offset)
    if trim:
        yt.trim_rows(q, 1, trim)

    code, report = doctor(capsys, "--checkpoint", location, "--cluster", cluster_uri, "--json")

    [finding] = report["queries"][location]["findings"]
    assert (code, report["healthy"], finding["severity"]) == (1, False, "action") and advice in finding["advice"]


def test_a_config_gives_every_query_with_its_tuning_values(yt, job, cluster_uri, capsys, tmp_path: Path) -> None:
    q, c, location = job
    for p in (0, 1):
        yt.advance_consumer(c, q, p, None, 20)
    config = tmp_path / "opsd.yaml"
    config.write_text(json.dumps({
        "cluster": cluster_uri,
        "pipelines": [{"name": "run", "source": {"path": q, "options": {"consumer_path": c,
                                                                        "max_rows_per_partition": "500"}},
                       "sink": {"format": "console"}, "checkpoint_location": location}],
        "watch": [{"name": "elsewhere", "checkpoint_location": location, "consumer": c}],
    }))

    code, report = doctor(capsys, "--config", str(config), "--json")

    assert code == 0
    assert report["queries"]["run"]["facts"]["max_rows_per_partition"] == 500
    assert report["queries"]["elsewhere"]["facts"]["desync"][q]["state"] == "in_sync"
    # The auto-tuner's view: the pipeline opsd runs is applied, the watched one only recommended; offline there is
    # no batch to judge, and the watched query (no cap known) gets the safe first cap as a recommendation.
    tuner = report["queries"]["run"]["facts"]["autotune"]["max_rows_per_partition"]
    assert (tuner["current"], tuner["direction"], tuner["reason"], tuner["mode"]) == (500, "hold", "no_batches",
                                                                                      "apply")
    watched = report["queries"]["elsewhere"]["facts"]["autotune"]["max_rows_per_partition"]
    assert (watched["recommended"], watched["reason"], watched["mode"]) == (100_000, "first_batch_safe", "recommend")


def doctor_of_daemon(capsys, recorder: Recorder) -> tuple[int, str]:
    """`opsd doctor --url` against a daemon endpoint serving `recorder`'s status."""
    server = OpsHttpServer(lambda: b"", status=recorder.status.to_json, host="127.0.0.1", port=0)
    server.start()
    try:
        return doctor(capsys, "--url", server.url)
    finally:
        server.stop()


def test_a_daemons_failed_query_and_a_backlog_that_does_not_drain_need_action(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # the table for people, unwrapped
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    recorder.status.update("clicks", active=False, exception_class="java.io.IOException", exception="disk full\n at")
    recorder.status.update("views", active=True)
    for query in ("clicks", "views"):
        recorder.record_lag(QueryLag(query, (PartitionLag(f"//{query}", 0, 900, None),), input_rows_per_second=30.0,
                                     processed_rows_per_second=10.0))
    code, out = doctor_of_daemon(capsys, recorder)

    flat = " ".join(out.split())
    assert code == 1 and "needs action" in flat
    assert "the query failed: java.io.IOException: disk full" in flat
    assert "the backlog of 900 rows is not draining: rows arrive at 30 rows/s, the query reads 10 rows/s" in flat
    assert flat.count("is not draining") == 1, "the failed query drains nothing whatever its tuning: no lag finding"


@pytest.mark.parametrize("args", [["--url", "http://127.0.0.1:{port}"], ["--config", "/nonexistent/opsd.yaml"]])
def test_the_doctor_failing_exits_2_with_the_reason(capsys, args: list[str]) -> None:
    code, out = doctor(capsys, *[a.format(port=free_port()) for a in args], "--json")

    assert code == 2 and out.startswith("opsd doctor: failed:")


def test_a_query_stopped_for_good_and_one_near_a_memory_limit_need_action(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    recorder.record_permanent_failure("broken", "NoSuchPathError", "NoSuchPathError: //home/out: no such node")
    recorder.status.update("big", active=True, max_rows_per_partition=50_000)
    recorder.record_oom("big", risk=1.2, batch_bytes=4e8, safe_max_rows_per_partition=20_000, target_risk=0.7)
    recorder.status.update("fine", active=True)
    recorder.record_oom("fine", risk=0.3, batch_bytes=1e6, safe_max_rows_per_partition=90_000, target_risk=0.7)
    code, out = doctor_of_daemon(capsys, recorder)

    flat = " ".join(out.split())
    assert code == 1
    assert "opsd stopped the query for good: NoSuchPathError: //home/out: no such node" in flat
    assert "opsd run --check" in flat
    assert "predicted to need 120% of a memory pool's limit" in flat
    assert "the safe max_rows_per_partition 20000 (now 50000)" in flat
    assert "30%" not in flat, "a query far from its limits gets no memory finding"
