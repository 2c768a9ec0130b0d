"""Every `opsd doctor` finding's advice, followed as written: the situation made on the embedded cluster (hand-made
checkpoints, no Spark), the doctor run offline, the command its advice names run through the CLI, and the finding
gone (or `opsd run --check` exit 0 where the advice is to restart the query). Findings that only a running daemon
sees (a failure, a crash loop, a stall, a backlog, the memory risk) are judged from their facts; the memory advice's
value is applied to a real tuning document and the OOM model judges the batch again.

The Spark run of a query behind the trim, failed, advised, sought and resumed, is `test_doctor_advice_spark.py`."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from opsd.checks.oom.evaluate import Observation, evaluate, planned_batch
from opsd.checks.producers.check import ProducersCheck
from opsd.checks.producers.collect import targets_for as producers_targets
from opsd.checks.tuning.collect import collect as collect_tuning
from opsd.checks.tuning.collect import sources_for
from opsd.config.load import load_config
from opsd.config.models import OpsdConfig
from opsd.config.thresholds import OOM_RISK_HIGH
from opsd.doctor.advice import Naming, findings
from opsd.doctor.report import FindingKind
from opsd.observe.progress import PartitionOffsets
from opsd.observe.recorder import Recorder
from opsd.observe.status import QueryStatus, StatusStore, status_of
from opsd.results.desync import DesyncEntry, DesyncState, HealOutcome
from opsd.results.lag import PartitionLag, QueryLag
from opsd.results.oom import OomVerdict
from opsd.results.producers import ProducerState
from opsd.telemetry.metrics import Metrics
from streaming_core.sink_producer import SEQUENCE_STRIDE
from tests.support.checkpoint import job_with_checkpoint, write_checkpoint
from tests.support.cluster import QUEUE_SCHEMA, make_queue
from tests.support.doctor import advised_commands, doctor, finding, follow, write_config

#: The job's checkpoint: batch 0 read rows 0..9 of each partition, the committed batch 1 rows 10..19.
BATCHES = {0: {0: 9, 1: 9}, 1: {0: 19, 1: 19}}


@pytest.fixture
def job(yt, yt_root: str, tmp_path: Path) -> tuple[str, str, str]:
    """A queue of 2 x 20 rows, its consumer, and a checkpoint whose committed batch 1 read everything."""
    return job_with_checkpoint(yt, yt_root, tmp_path / "cp", BATCHES, committed=1)


def consumer_at(yt, q: str, c: str, offsets: dict[int, int]) -> None:
    for p, offset in offsets.items():
        yt.advance_consumer(c, q, p, None, offset)


def offline(capsys, location: str, cluster_uri: str) -> tuple[int, dict]:
    return doctor(capsys, "--checkpoint", location, "--cluster", cluster_uri, "--json")


# -- desync, offline: follow the command, the finding is gone ------------------------------------------------------


@pytest.mark.parametrize(("consumer", "kind", "severity"), [
    ({0: 10, 1: 10}, "lagging_one_batch", "info"),
    ({0: 5, 1: 20}, "stuck", "action"),  # behind the batch before the committed one too
])
def test_a_consumer_behind_the_checkpoint_is_healed_by_the_advised_command(yt, job, cluster_uri, capsys, consumer,
                                                                          kind, severity) -> None:
    q, c, location = job
    consumer_at(yt, q, c, consumer)

    code, report = offline(capsys, location, cluster_uri)
    found = finding(report, location, kind)
    [command] = advised_commands(found["advice"])
    healed = follow(capsys, command)

    assert (code, found["severity"]) == (0 if severity == "info" else 1, severity)
    assert command[:3] == ["desync", "heal", "--checkpoint"] and healed[0] == 0
    assert yt.get_consumer_offsets(c, q) == {0: 20, 1: 20}
    code, report = offline(capsys, location, cluster_uri)
    assert code == 0 and report["queries"][location]["findings"] == []


def test_a_lagging_consumer_with_rows_waiting_is_healed_once_the_query_is_stopped_as_advised(yt, job, cluster_uri,
                                                                                             capsys) -> None:
    q, c, location = job
    consumer_at(yt, q, c, {0: 10, 1: 10})
    yt.insert_rows(q, [{"data": "x", "n": i} for i in range(20)])  # rows waiting past the checkpoint

    _, report = offline(capsys, location, cluster_uri)
    found = finding(report, location, "lagging_one_batch")
    [command] = advised_commands(found["advice"])
    while_running = follow(capsys, command)
    stopped = follow(capsys, [*command, "--stopped"])

    assert "add --stopped once the query is stopped" in found["advice"]
    assert while_running[0] == 1 and HealOutcome.QUERY_BUSY.words in while_running[1]
    assert stopped[0] == 0 and yt.get_consumer_offsets(c, q) == {0: 20, 1: 20}
    assert offline(capsys, location, cluster_uri)[1]["queries"][location]["findings"] == []
    # a daemon knows the query is stopped: its advice says --stopped itself
    stopped = status_of("q", {"active": False, "desync": report["queries"][location]["facts"]["desync"]})
    [daemon] = findings("q", stopped, NAMING)
    assert advised_commands(daemon.advice) == [["desync", "heal", "q", "--config", "opsd.yaml", "--stopped"]]


@pytest.mark.parametrize("mode", ["checkpoint", "config"])
def test_a_consumer_ahead_of_the_checkpoint_is_moved_back_by_the_advised_seek(yt, job, cluster_uri, capsys,
                                                                             tmp_path: Path, mode: str) -> None:
    q, c, location = job
    yt.insert_rows(q, [{"data": "x", "n": i} for i in range(20)])  # 30 rows per partition
    consumer_at(yt, q, c, {0: 20, 1: 25})
    config = write_config(tmp_path / "opsd.yaml", cluster_uri, q, c, location)
    where = ["--checkpoint", location, "--cluster", cluster_uri] if mode == "checkpoint" else ["--config", str(config)]
    query = location if mode == "checkpoint" else "run"

    code, report = doctor(capsys, *where, "--json")
    found = finding(report, query, "consumer_ahead")
    [command] = advised_commands(found["advice"])
    moved = follow(capsys, command)

    assert code == 1 and "rows [20, 25) would be skipped at restart" in found["what"]
    assert command[:8] == ["consumer", "seek", q, c, "--partition", "1", "--offset", "20"]
    assert ("--checkpoint" in command) == (mode == "checkpoint") and ("--config" in command) == (mode == "config")
    assert moved == (0, f"{c} on {q}: moved partition 1 25 -> 20\n", "")
    code, report = doctor(capsys, *where, "--json")
    assert code == 0 and report["queries"][query]["findings"] == []


def test_a_consumer_past_the_queues_end_is_moved_back_by_the_advised_seek(yt, job, cluster_uri, capsys) -> None:
    q, c, location = job
    consumer_at(yt, q, c, {0: 20, 1: 500})  # past the 20 rows of partition 1

    code, report = offline(capsys, location, cluster_uri)
    found = finding(report, location, "consumer_ahead_of_queue")
    [command] = advised_commands(found["advice"])

    assert code == 1 and "past the queue's end on partition 1" in found["what"]
    assert command == ["consumer", "seek", q, c, "--partition", "1", "--offset", "20", "--checkpoint", location,
                       "--cluster", cluster_uri]
    assert follow(capsys, command)[:2] == (0, f"{c} on {q}: moved partition 1 500 -> 20\n")
    assert offline(capsys, location, cluster_uri)[0] == 0


def test_a_checkpoint_of_a_recreated_queue_resumes_nowhere_and_a_new_one_after_the_advised_seek_does(
        yt, job, cluster_uri, capsys, tmp_path: Path) -> None:
    q, c, location = job
    consumer_at(yt, q, c, {0: 20, 1: 20})
    yt.remove(q)
    yt.create("table", q, attributes={"dynamic": True, "tablet_count": 2, "schema": QUEUE_SCHEMA})
    yt.register_queue_consumer(q, c)
    yt.insert_rows(q, [{"data": "new", "n": i} for i in range(6)])
    old = write_config(tmp_path / "old.yaml", cluster_uri, q, c, location)
    new = write_config(tmp_path / "new.yaml", cluster_uri, q, c, str(tmp_path / "new-checkpoint"))

    code, report = doctor(capsys, "--config", str(old), "--json")
    found = finding(report, "run", "checkpoint_ahead_of_queue")
    [command] = advised_commands(found["advice"])
    refused = follow(capsys, ["run", "--check", str(new)])
    moved = follow(capsys, command)

    assert code == 1 and "rows [3, 20) of partition 0, [3, 20) of partition 1 would be skipped" in found["what"]
    assert "new checkpointLocation" in found["advice"]
    assert command == ["consumer", "seek", q, c, "--to", "trim", "--past-checkpoint", "--query", "run", "--config",
                       str(old)]
    # before the seek, a new checkpoint would start at the consumer, past the recreated queue's end
    assert refused[0] == 1 and "consumer" in refused[1] and "past the queue's end" in refused[1]
    assert moved[:2] == (0, f"{c} on {q}: moved partition 0 20 -> 0, partition 1 20 -> 0\n")
    assert follow(capsys, ["run", "--check", str(old)])[0] == 1, "the old checkpoint still cannot resume"
    assert follow(capsys, ["run", "--check", str(new)])[:2] == (0, "1 pipeline(s) checked: ready to run\n")


@pytest.mark.parametrize("vital", [True, False], ids=["vital", "not-vital"])
def test_a_query_behind_the_trim_resumes_after_the_advised_seek_with_its_own_checkpoint(
        yt, job, cluster_uri, capsys, monkeypatch, tmp_path: Path, vital: bool) -> None:
    q, c, location = job
    consumer_at(yt, q, c, {0: 20, 1: 20})
    yt.register_queue_consumer(q, c, vital=vital)
    yt.insert_rows(q, [{"data": "x", "n": i} for i in range(40)])  # 40 rows per partition
    yt.trim_rows(q, 1, 25, past_vital_consumers=True)
    config = write_config(tmp_path / "opsd.yaml", cluster_uri, q, c, location)
    fresh = write_config(tmp_path / "fresh.yaml", cluster_uri, q, c, str(tmp_path / "new-checkpoint"))

    code, report = doctor(capsys, "--config", str(config), "--json")
    monkeypatch.setenv("COLUMNS", "400")  # the table for people, unwrapped
    table = doctor(capsys, "--config", str(config))[1]
    found = finding(report, "run", "behind_trim")
    commands = advised_commands(found["advice"])
    before = follow(capsys, ["run", "--check", str(config)])
    fresh_before = follow(capsys, ["run", "--check", str(fresh)])
    for command in commands:
        assert follow(capsys, command)[0] == 0, (command, capsys.readouterr())

    assert code == 1 and report["queries"]["run"]["facts"]["desync"][q]["vital"] is vital
    assert (f"{q} (vital)" in table) is vital and f"partition 1: {DesyncState.BEHIND_TRIM.words}" in table
    assert "rows [20, 25) of partition 1 were trimmed before the query read them (5 rows;" in found["what"]
    assert "those 5 rows are gone" in found["advice"] and "with its checkpoint" in found["advice"]
    assert commands[0] == ["consumer", "seek", q, c, "--partition", "1", "--to", "trim", "--query", "run", "--config",
                           str(config)]
    assert (["consumer", "register", q, c, "--vital", "--cluster", cluster_uri] in commands) is not vital
    assert before[0] == 1 and "problem: pipeline 'run': checkpoint:" in before[1]
    assert f"opsd consumer seek {q} {c} --partition 1 --to trim" in before[1]
    assert yt.get_consumer_offsets(c, q) == {0: 20, 1: 25}
    assert yt.list_queue_consumer_registrations(q, c)[0].vital
    assert doctor(capsys, "--config", str(config), "--json")[1]["queries"]["run"]["findings"] == []
    assert follow(capsys, ["run", "--check", str(config)])[:2] == (0, "1 pipeline(s) checked: ready to run\n")
    # a new checkpoint starts at the consumer: behind the trim as well before the seek, ready after it
    assert fresh_before[0] == 1 and "rows [20, 25) of partition 1 were trimmed" in fresh_before[1]
    assert follow(capsys, ["run", "--check", str(fresh)])[0] == 0


def test_spyt_offsets_without_a_consumer_are_a_problem_the_advised_flag_resolves(yt, yt_root, cluster_uri, capsys,
                                                                                tmp_path: Path) -> None:
    q, c, _ = job_with_checkpoint(yt, yt_root, tmp_path / "unused", BATCHES, committed=1, consumer_at=20)
    location = str(write_checkpoint(tmp_path / "spyt", q, BATCHES, 1, consumer=None))

    code, report = offline(capsys, location, cluster_uri)
    found = finding(report, location, "problem")

    assert code == 1 and "name no consumer_path" in found["what"] and "--consumer" in found["advice"]
    code, report = doctor(capsys, "--checkpoint", location, "--consumer", c, "--cluster", cluster_uri, "--json")
    assert code == 0 and report["queries"][location]["findings"] == []


# -- what only a daemon sees: judged from its facts ----------------------------------------------------------------


NAMING = Naming.of_config("opsd.yaml")


def findings_of(facts: dict) -> list:
    return findings("q", QueryStatus("q", **facts), NAMING)


def kinds(facts: dict) -> list[str]:
    return [f.kind for f in findings_of(facts)]


def test_a_backlog_that_does_not_drain_is_a_finding_while_the_query_runs_only_and_its_advised_cap_is_set(
        yt, yt_root, cluster_uri, capsys, tmp_path: Path) -> None:
    config = write_config(tmp_path / "opsd.yaml", cluster_uri, f"{yt_root}/queue", f"{yt_root}/consumer", "cp",
                          name="q")
    lag = QueryLag("q", (PartitionLag("//q", 0, 900, None),), input_rows_per_second=30.0,
                   processed_rows_per_second=10.0)

    [found] = findings("q", QueryStatus("q", active=True, lag=lag, max_rows_per_partition=500),
                       Naming.of_config(str(config)))
    [command] = advised_commands(found.advice)
    _, report = doctor(capsys, "--config", str(config), "--json")
    before = report["queries"]["q"]["facts"]["max_rows_per_partition"]
    set_ = follow(capsys, command)
    _, report = doctor(capsys, "--config", str(config), "--json")

    assert found.kind == "lag" and "raise max_rows_per_partition (now 500)" in found.advice
    assert command == ["tuning", "set", "q", "--config", str(config), "--max-rows-per-partition", "1000"]
    assert (before, set_[0], report["queries"]["q"]["facts"]["max_rows_per_partition"]) == (None, 0, 1000)
    assert kinds({"active": True, "lag": lag}) == ["lag"] and "unlimited" in findings_of({"active": True, "lag": lag})[
        0].advice
    assert kinds({"active": False, "lag": lag}) == [], "a stopped query drains nothing, whatever its tuning"
    assert kinds({"active": False, "exception_class": "TrimmedRowsError", "lag": lag}) == ["failed"]


@pytest.mark.parametrize(("facts", "fragments"), [
    ({"permanent_failure": "TrimmedRowsError: //q: partition 1, rows [20, 25) ... were trimmed",
      "desync": {"//q": DesyncEntry()}},
     ("(its consumer must be moved first: the desync finding below says how)", "(opsd run --check opsd.yaml;",
      "(opsd run opsd.yaml)")),
    ({"permanent_failure": "NoSuchPathError: //home/out: no such node"},
     ("(opsd run --check opsd.yaml;", "(opsd run opsd.yaml)")),
    ({"active": False, "exception_class": "BeyondQueueEndError", "error": "BeyondQueueEndError: //q"},
     ("(its consumer must be moved first: run the doctor with --config for how)", "(opsd run --check opsd.yaml;")),
    ({"crash_loop": True, "restarts": 7}, ("restart backoff is at the cap",)),
    ({"stalled": True}, ("(SIGTERM, then opsd run opsd.yaml)",)),
])
def test_a_failing_or_stalled_query_is_advised_the_check_and_the_restart_of_its_config(facts: dict,
                                                                                       fragments: tuple) -> None:
    [found] = findings_of(facts)

    assert found.severity == "action" and all(f in found.advice for f in fragments), found.advice
    assert all(c[0] == "run" and c[-1] == "opsd.yaml" for c in advised_commands(found.advice))
    assert ("(opsd run --check" in found.advice) is ("permanent_failure" in facts or "exception_class" in facts)


def test_the_advised_cap_for_a_batch_near_its_memory_limit_brings_the_risk_under_the_alert(
        yt, yt_root, cluster_uri, capsys, tmp_path: Path) -> None:
    mb, limit = 1024 * 1024, 512 * 1024 * 1024
    seen = {"jvm_heap": [Observation(i, s * mb, 100 * mb + 3.0 * s * mb) for i, s in enumerate((20, 60, 100, 140))]}
    waiting = [PartitionOffsets("//q", p, None, -1, 999_999) for p in (0, 1)]  # a million rows per partition
    config = write_config(tmp_path / "opsd.yaml", cluster_uri, f"{yt_root}/queue", f"{yt_root}/consumer", "cp",
                          name="q")
    pipeline = load_config(config).pipelines[0]

    def judged(cap: int | None) -> QueryStatus:
        evaluation = evaluate("q", planned_batch(waiting, cap, bytes_per_row=100), {"jvm_heap": limit}, seen)
        oom = OomVerdict(evaluation.risk, 0.95, 0.0, 0.0, evaluation.safe_max_rows_per_partition)  # rows only
        return QueryStatus("q", active=True, max_rows_per_partition=cap, oom=oom)

    before = judged(None)
    [found] = findings("q", before, Naming.of_config(str(config)))
    [command] = advised_commands(found.advice)
    assert follow(capsys, command)[0] == 0
    after = judged(collect_tuning(yt, sources_for(pipeline, {})).max_rows_per_partition)

    safe = before.oom.safe_max_rows_per_partition
    assert before.oom.risk >= OOM_RISK_HIGH and found.kind == "memory"
    assert command == ["tuning", "set", "q", "--config", str(config), "--max-rows-per-partition", str(safe)]
    assert after.max_rows_per_partition == safe and after.oom.risk < OOM_RISK_HIGH
    assert findings("q", after, NAMING) == []


def test_producer_sessions_ahead_of_the_query_are_removed_by_the_advised_command(yt, yt_root, cluster_uri, capsys,
                                                                                 tmp_path: Path) -> None:
    """A query in producer mode whose batch ids began again (a new checkpoint under the old session names): its
    session holds batch 500 while the query is at batch 2, so its rows are skipped; the advised removal ends it."""
    document = {"cluster": cluster_uri, "pipelines": [
        {"name": "p", "checkpoint_location": str(tmp_path / "ckpt"),
         "source": {"path": f"{yt_root}/in", "options": {"consumer_path": f"{yt_root}/consumer"}},
         "sink": {"format": "yt", "path": f"{yt_root}/out", "options": {"producer_path": f"{yt_root}/producer"}}}]}
    config = OpsdConfig.model_validate(document)
    yt.create("table", f"{yt_root}/out", attributes={"dynamic": True, "schema": QUEUE_SCHEMA})
    yt.create_queue_producer(f"{yt_root}/producer")
    [target] = producers_targets(config)
    yt.create_queue_producer_session(target.producer, target.queue, f"{target.prefix}-p0")
    yt.push_queue_producer(target.producer, target.queue, f"{target.prefix}-p0", 0, [{"data": "x"}],
                           sequence_number=500 * SEQUENCE_STRIDE)
    recorder = Recorder(Metrics(CollectorRegistry()), StatusStore())
    recorder.status.update("p", last_batch_id=2)
    check = ProducersCheck(recorder, config)
    [report] = check.run()

    [found] = findings("p", QueryStatus("p", active=True, producers=report), Naming.of_config("run.yaml", cluster_uri))
    assert found.kind == FindingKind.PRODUCER_SESSIONS_AHEAD and "batch 2" in found.what
    (tmp_path / "opsd.json").write_text(json.dumps(document))
    _, offline_report = doctor(capsys, "--config", str(tmp_path / "opsd.json"), "--json")
    offline_sessions = offline_report["queries"]["p"]["facts"]["producers"]["sessions"]
    assert [s["batch_id"] for s in offline_sessions] == [500], "offline: the sessions, not the query's batch"
    [remove] = [c for c in advised_commands(found.advice) if c[:2] == ["producer", "remove-sessions"]]
    assert follow(capsys, remove)[0] == 0
    assert [r.state for r in check.run()] == [ProducerState.OK]


@pytest.mark.hostile
def test_names_from_a_checkpoint_reach_the_advised_command_quoted_for_the_shell(yt, yt_root: str, tmp_path: Path,
                                                                                cluster_uri: str, capsys) -> None:
    """Issue 32: the queue and the consumer an advice names come from the checkpoint's offsets (and the location from
    the command line): text that a shell reads as commands (`$(...)`, `;`, a backquote, a space) is quoted, so that
    the command copied as written moves only what it names and runs nothing else."""
    q, c = f"{yt_root}/q $(touch pwned)", f"{yt_root}/c;id`x`"
    make_queue(yt, q, consumer=c)
    yt.insert_rows(q, [{"data": "x", "n": i} for i in range(40)])
    location = str(tmp_path / "cp ;x")
    write_checkpoint(Path(location), q, BATCHES, 1, consumer=c)
    consumer_at(yt, q, c, {0: 10, 1: 10})

    report = offline(capsys, location, cluster_uri)[1]
    advice = finding(report, location, "lagging_one_batch")["advice"]
    command = shlex.split(advice.removeprefix("heal it (opsd ").removesuffix(")"))

    assert command == ["desync", "heal", "--checkpoint", location, "--cluster", cluster_uri, "--queue", q, "--consumer",
                       c]
    assert follow(capsys, command)[0] == 0 and yt.get_consumer_offsets(c, q) == {0: 20, 1: 20}
