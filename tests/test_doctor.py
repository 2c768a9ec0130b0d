"""`opsd doctor`: per query the facts and plain advice, for a checkpoint, a config file or a running daemon; exit 0
healthy, 1 needs action, 2 the doctor failed."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from opsd.checks.desync.evaluate import evaluate
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.results.autotune import Decision, Knob, TunerDecision, TuneReason, TunerMode
from opsd.results.desync import DesyncState
from opsd.results.lag import PartitionLag, QueryLag
from opsd.results.positions import PartitionPositions, QueuePositions
from opsd.telemetry.http import OpsHttpServer
from opsd.telemetry.metrics import Metrics
from tests.support.checkpoint import job_with_checkpoint, write_checkpoint
from tests.support.doctor import doctor
from tests.support.oom import oom_verdict
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
        f"heal it (opsd desync heal --checkpoint {location} --cluster {cluster_uri} --queue {q} --consumer {c})")


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
    elsewhere = f"{c}_elsewhere"  # each query its own consumer and checkpoint
    yt.create_consumer(elsewhere)
    yt.register_queue_consumer(q, elsewhere)
    for consumer, p in itertools.product((c, elsewhere), (0, 1)):
        yt.advance_consumer(consumer, q, p, None, 20)
    theirs = write_checkpoint(tmp_path / "elsewhere", q, {0: {0: 9, 1: 9}, 1: {0: 19, 1: 19}}, 1, consumer=elsewhere)
    config = tmp_path / "opsd.yaml"
    config.write_text(json.dumps({
        "cluster": cluster_uri,
        "pipelines": [{"name": "run", "source": {"path": q, "options": {"consumer_path": c,
                                                                        "max_rows_per_partition": "500"}},
                       "sink": {"format": "console"}, "checkpoint_location": location}],
        "watch": [{"name": "elsewhere", "checkpoint_location": str(theirs), "consumer": elsewhere}],
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


def doctor_of_daemon(capsys, recorder: Recorder, *args: str) -> tuple[int, dict | str]:
    """`opsd doctor --url` against a daemon endpoint serving `recorder`'s status."""
    server = OpsHttpServer(lambda: b"", status=recorder.status.to_json, host="127.0.0.1", port=0)
    server.start()
    try:
        return doctor(capsys, "--url", server.url, *args)
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
    recorder.record_oom("big", oom_verdict(1.2, 20_000, batch_bytes=4e8), target_risk=0.7)
    recorder.status.update("fine", active=True)
    recorder.record_oom("fine", oom_verdict(0.3, 90_000), target_risk=0.7)
    code, out = doctor_of_daemon(capsys, recorder)

    flat = " ".join(out.split())
    assert code == 1
    assert "opsd stopped the query for good: NoSuchPathError: //home/out: no such node" in flat
    assert "opsd run --check" in flat
    assert "predicted to need 120% of a memory pool's limit" in flat
    assert "the safe max_rows_per_partition 20000 (now 50000)" in flat
    assert "30%" not in flat, "a query far from its limits gets no memory finding"


def test_a_query_near_a_memory_limit_is_advised_the_byte_cap_which_holds_whatever_the_rows_width(capsys,
                                                                                                monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    recorder.status.update("wide", active=True, max_rows_per_partition=50_000, max_bytes_per_partition=64 << 20)
    recorder.record_oom("wide", oom_verdict(1.2, 20_000, 16 << 20, batch_bytes=4e8), target_risk=0.7)
    code, out = doctor_of_daemon(capsys, recorder)
    flat = " ".join(out.split())
    assert code == 1
    assert f"the safe max_bytes_per_partition {16 << 20} (now {64 << 20}" in flat
    assert f"--max-bytes-per-partition {16 << 20}" in flat


# -- for people: blocks below 120 columns, a table where it fits, whole when piped ---------------------------------

LONG_QUERY = "clickstream_sessions_enrichment_for_the_analytics_team_" + "x" * 40
LONG_QUEUE = "//home/analytics/clickstream/very/deeply/nested/directories/of/the/team/queue_" + "y" * 30


def troubled_daemon() -> Recorder:
    """A daemon's status: a running query with a long name whose long-named queue's checkpoint is behind the trim
    on partition 0 (in sync on 1), and whose cap the auto-tuner holds because it does not bind."""
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    recorder.status.update(LONG_QUERY, active=True, started_at=1.0, max_rows_per_partition=500)
    positions = (PartitionPositions(0, 3, None, None, 3, 20, 25), PartitionPositions(1, 20, None, None, 20, 20, 0))
    recorder.record_desync(evaluate(QueuePositions(LONG_QUERY, LONG_QUEUE, "//home/c", "yt", 1, None, positions)))
    decision = Decision(LONG_QUERY, Knob.MAX_ROWS, 500, 500, TuneReason.CAP_NOT_BINDING)
    recorder.record_autotune(TunerDecision(decision, TunerMode.APPLY, applied=False, bounds=(1000, 500_000)))
    return recorder


def test_at_80_columns_each_query_is_a_block_states_and_reasons_in_words_nothing_cut(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out = doctor_of_daemon(capsys, troubled_daemon())
    lines = out.splitlines()

    assert code == 1 and "…" not in out and max(len(line) for line in lines) <= 80
    block = lines[lines.index(LONG_QUERY[:80]) + 2:]  # the name folds onto a second line
    assert block[0].split() == ["state", "running"], "the state comes first"
    assert LONG_QUERY in "".join(lines) and LONG_QUEUE in "".join(line.strip() for line in lines)
    flat = " ".join(out.split())
    assert f"partition 0: {DesyncState.BEHIND_TRIM.words}" in flat and "partition 1: in sync" in flat
    assert "(the cap is not what limits batches; apply)" in flat
    assert not {"behind_trim", "in_sync", "cap_not_binding"} & set(re.findall(r"[a-z]+_[a-z_]+", flat))
    assert "needs action" in lines and "were trimmed before the query read them" in flat


def test_at_200_columns_the_queries_and_findings_are_tables(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    recorder.status.update("clicks", active=False, started_at=1.0, exception_class="java.io.IOException",
                           exception="disk full")
    code, out = doctor_of_daemon(capsys, recorder)
    lines = out.splitlines()

    assert code == 1 and max(len(line.rstrip()) for line in lines) <= 200
    assert lines[1].split() == ["query", "state", "desync", "backlog", "rows", "max", "lag", "time", "to", "drain",
                                "max_rows", "/", "dynBatch", "auto-tuner", "last", "failure"]
    assert next(line.split()[:2] for line in lines if line.startswith(" clicks")) == ["clicks", "failed"]
    assert next(line for line in lines if "severity" in line).split() == ["query", "severity", "finding", "advice"]


def test_piped_output_is_whole_never_cut_at_80_columns(capsys, monkeypatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out = doctor_of_daemon(capsys, troubled_daemon())  # capsys' stdout is not a terminal
    lines = out.splitlines()

    assert code == 1 and LONG_QUERY in lines and f"  desync               {LONG_QUEUE}" in lines
    finding = next(line for line in lines if line.startswith("  finding"))
    assert finding.endswith("its next batch fails (TrimmedRowsError), with this checkpoint or a new one, until the "
                            "consumer is moved")


def test_a_healthy_run_says_so_in_one_line_without_an_empty_findings_table(capsys, monkeypatch) -> None:
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    recorder.status.update("clicks", active=True, started_at=1.0)
    for width in ("80", "200"):
        monkeypatch.setenv("COLUMNS", width)
        code, out = doctor_of_daemon(capsys, recorder)

        assert code == 0 and out.splitlines()[-1] == "healthy: nothing to do"
        assert not {"severity", "finding", "advice", "healthy"} & set(out.split()[:-3])


def test_json_keeps_the_machine_names(capsys) -> None:
    code, report = doctor_of_daemon(capsys, troubled_daemon(), "--json")

    assert code == 1
    facts = report["queries"][LONG_QUERY]["facts"]
    assert facts["desync"][LONG_QUEUE]["partitions"]["0"]["state"] == "behind_trim"
    assert facts["autotune"][Knob.MAX_ROWS]["reason"] == "cap_not_binding"


def test_tablets_added_after_the_checkpoint_are_read_from_the_consumer_and_counted_in_the_backlog(
        yt, job, cluster_uri, capsys) -> None:
    q, c, location = job
    for p in (0, 1):
        yt.advance_consumer(c, q, p, None, 20)
    yt.reshard(q, 4)
    yt.insert_rows(q, [{"data": "new", "n": i} for i in range(7)], tablet_index=2)
    yt.advance_consumer(c, q, 2, None, 3)

    code, report = doctor(capsys, "--checkpoint", location, "--cluster", cluster_uri, "--json")

    facts = report["queries"][location]["facts"]
    partitions = facts["desync"][q]["partitions"]
    assert (code, report["healthy"], report["queries"][location]["findings"]) == (0, True, [])
    assert [(p, partitions[p]["state"], partitions[p]["added"]) for p in sorted(partitions)] == [
        ("0", "in_sync", False), ("1", "in_sync", False), ("2", "in_sync", True), ("3", "in_sync", True)]
    assert (partitions["2"]["checkpoint_next"], partitions["2"]["row_count"]) == (3, 7)
    assert facts["lag"]["backlog_rows"] == 4


def test_tablets_the_checkpoint_read_removed_by_a_reshard_need_a_new_checkpoint(yt, job, cluster_uri, capsys) -> None:
    q, c, location = job
    yt.trim_rows(q, 1, 20)
    yt.reshard(q, 1)

    code, report = doctor(capsys, "--checkpoint", location, "--cluster", cluster_uri, "--json")

    [finding] = report["queries"][location]["findings"]
    assert (code, finding["severity"]) == (1, "action")
    assert report["queries"][location]["facts"]["desync"][q]["removed_partitions"] == [1]
    assert f"{q}: the checkpoint has read partitions 1, which the queue no longer has" in finding["what"]
    assert "QueueReshardedError" in finding["what"]
    assert finding["advice"].startswith("restart the query with a new checkpointLocation")
    assert f"where the consumer {c} stands" in finding["advice"]
    assert f"opsd queue reshard {q} --tablets N" in finding["advice"]
