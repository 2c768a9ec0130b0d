"""The decision history (`opsd.stores.history`): which decisions are kept, the table on the embedded cluster and
through the YTsaurus stand-in (the real client), bounded per query, surviving a restart of the daemon's checks, never
fatal to the job, and `opsd history` for people and scripts."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from opsd.checks.autotune.check import AutotuneCheck
from opsd.checks.autotune.check import targets_for as autotune_targets
from opsd.checks.desync.evaluate import evaluate
from opsd.checks.registry import build_checks
from opsd.cli.main import main
from opsd.collect.positions import PositionsCollector, QueryTarget, collect_target
from opsd.config.models import OpsdConfig
from opsd.observe.progress import BatchSummary
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.results.autotune import Decision, Knob, ReplanRefusal, TunerDecision, TuneReason, TunerMode
from opsd.results.desync import HealOutcome
from opsd.results.history import REASONS, HistoryEntry, HistoryKind, HistoryOutcome
from opsd.runtime.runner import Supervisor
from opsd.stores.history.apply import HistoryLog
from opsd.stores.history.collect import read_history
from opsd.stores.history.decide import HistoryMemory, heal_entries, novel, remember, tuner_entries
from opsd.stores.history.table import from_row, history_paths
from opsd.telemetry.metrics import Metrics
from streaming_core.cluster import Cluster, connect
from tests.support.checkpoint import job_with_checkpoint, write_checkpoint
from tests.support.standin import STANDIN_TOKEN


@pytest.fixture(params=["embedded", "standin"])
def backend(request, cluster_uri: str, monkeypatch) -> Iterator[tuple[Cluster, str]]:
    """A cluster and its URI: the embedded one, or the YTsaurus stand-in through `ytsaurus-client`."""
    if request.param == "embedded":
        uri = cluster_uri
    else:
        monkeypatch.setenv("YT_TOKEN", STANDIN_TOKEN)
        uri = request.getfixturevalue("standin").uri
    with connect(uri) as cluster:
        root = f"//tmp/h{uuid.uuid4().hex[:12]}"
        cluster.create("map_node", root, recursive=True)
        yield cluster, uri, root


def recorder_at(now: float, registry: CollectorRegistry | None = None) -> Recorder:
    return Recorder(Metrics(registry or CollectorRegistry()), StatusStore(), clock=lambda: now)


def entry(query: str, at: float, subject: str = "max_rows_per_partition", before: int = 1, after: int = 2
          ) -> HistoryEntry:
    return HistoryEntry(query, at, HistoryKind.TUNER, subject, HistoryOutcome.APPLIED, TuneReason.FAST_BATCHES, before,
                        after, {"batch_id": 7, "oom_risk": None})


# -- decide (pure) ----------------------------------------------------------------------------------------------


def test_holds_are_not_kept_and_changes_are_kept_applied_or_recommended() -> None:
    def tuner(current, recommended, applied):
        return TunerDecision(Decision("q", Knob.MAX_ROWS, current, recommended, TuneReason.FAST_BATCHES, {"x": 1}),
                             TunerMode.APPLY if applied else TunerMode.RECOMMEND, applied, (1, 10))

    kept = tuner_entries([tuner(5, 5, True), tuner(5, 8, True), tuner(5, 3, False)], 100.0)

    assert [(e.outcome, e.before, e.after, e.inputs["mode"]) for e in kept] == [
        ("applied", 5, 8, "apply"), ("recommended", 5, 3, "recommend")]


def test_heals_are_kept_when_made_or_refused_as_unsafe_never_while_waiting(yt, yt_root, tmp_path) -> None:
    q, _, location = job_with_checkpoint(yt, yt_root, tmp_path / "cp", {0: {0: 9, 1: 9}, 1: {0: 19, 1: 19}},
                                         committed=1, consumer_at=10)
    desync = evaluate(collect_target(yt, QueryTarget("job", location))[0])

    healed = heal_entries(desync, HealOutcome.HEALED, {0: (10, 20), 1: (10, 20)}, 5.0)
    assert [(e.subject, e.before, e.after, e.inputs["committed_batch"]) for e in healed] == [
        (q, {"0": 10, "1": 10}, {"0": 20, "1": 20}, 1)]
    assert heal_entries(desync, HealOutcome.BEHIND_TRIM, {}, 5.0)[0].after is None
    for waiting in (HealOutcome.BATCH_RUNNING, HealOutcome.QUERY_BUSY, HealOutcome.NOTHING_TO_HEAL):
        assert heal_entries(desync, waiting, {}, 5.0) == []


def test_a_standing_decision_is_kept_once_and_a_different_one_again() -> None:
    first = [entry("q", 1.0)]
    memory = remember(HistoryMemory(), first)

    assert novel([entry("q", 2.0)], memory) == []
    assert novel([entry("q", 3.0, after=4)], memory) == [entry("q", 3.0, after=4)]
    assert novel([entry("other", 3.0)], memory) == [entry("other", 3.0)]


def test_a_damaged_row_is_refused_naming_the_table_the_row_and_the_field() -> None:
    row = {"query": "q", "id": 3, "at": 1.0, "kind": "tuner", "subject": "s", "outcome": "applied",
           "reason": "fast_batches", "before": "1", "after": "{not json", "inputs": "{}"}
    with pytest.raises(ValueError, match=r"//h: row \(query='q', id=3\): field 'after' is not JSON"):
        from_row(row, "//h")
    with pytest.raises(ValueError, match="field 'kind' is 'oops'"):
        from_row({**row, "after": "2", "kind": "oops"}, "//h")
    with pytest.raises(ValueError, match="field 'outcome' is 'oops', not an outcome this version knows"):
        from_row({**row, "after": "2", "outcome": "oops"}, "//h")
    with pytest.raises(ValueError, match="field 'reason' is 'oops', not a reason this version knows"):
        from_row({**row, "after": "2", "reason": "oops"}, "//h")
    healed = from_row({**row, "after": "2", "outcome": "healed", "reason": "healed"}, "//h")
    assert (healed.outcome, healed.reason) == (HealOutcome.HEALED, HealOutcome.HEALED)
    assert from_row({**row, "after": "2", "reason": "stateful"}, "//h").reason is ReplanRefusal.STATEFUL


def test_the_reasons_of_decisions_are_told_apart_by_value_alone() -> None:
    values = [r.value for kind in REASONS for r in kind]
    assert len(values) == len(set(values))


# -- the table, on both backends --------------------------------------------------------------------------------


def test_entries_round_trip_newest_first_and_each_query_keeps_at_most_its_bound(backend) -> None:
    cluster, _, root = backend
    path = f"{root}/history"
    registry = CollectorRegistry()
    log = HistoryLog({"a": path, "b": path}, recorder_at(0.0, registry), rows_per_query=3)

    for i in range(5):  # one clock tick for several decisions: ids stay unique and ordered
        log.record(cluster, [entry("a", 100.0, after=i), entry("b", 100.0 + i, after=i)])

    newest = read_history(cluster, path, "a")
    assert [e.after for e in newest] == [4, 3, 2]
    assert newest[0] == entry("a", 100.0, after=4)
    assert [e.after for e in read_history(cluster, path, "b")] == [4, 3, 2]
    assert len(cluster.select_rows(path)) == 6
    assert registry.get_sample_value("opsd_history_entries_total", {"query": "a"}) == 5

    restarted = HistoryLog({"a": path}, recorder_at(0.0), rows_per_query=3)  # reads the ids again: still bounded
    restarted.record(cluster, [entry("a", 200.0, after=9)])
    assert [e.after for e in read_history(cluster, path, "a")] == [9, 4, 3]


def test_the_stand_in_serves_every_call_the_history_makes(standin, monkeypatch) -> None:
    monkeypatch.setenv("YT_TOKEN", STANDIN_TOKEN)
    path = f"//tmp/h{uuid.uuid4().hex[:12]}/history"
    before = len(standin.served)
    with connect(standin.uri) as cluster:
        log = HistoryLog({"a": path}, recorder_at(0.0), rows_per_query=1)
        log.record(cluster, [entry("a", 1.0), entry("a", 2.0, after=5)])
        assert [e.after for e in read_history(cluster, path, "a")] == [5]
    served = {s.command for s in standin.served[before:]}
    assert {"create", "select_rows", "insert_rows", "delete_rows"} <= served


# -- the daemon's checks ----------------------------------------------------------------------------------------


def config_for(uri: str, queue: str, consumer: str, location: str, **checks) -> OpsdConfig:
    return OpsdConfig.model_validate({
        "cluster": uri, "checks": checks,
        "pipelines": [{"name": "job", "source": {"path": queue, "options": {"consumer_path": consumer}},
                       "sink": {"format": "console"}, "checkpoint_location": location}]})


def heal_once(config: OpsdConfig, now: float, registry: CollectorRegistry | None = None) -> None:
    """What a fresh daemon does: build its checks from the config, run the desync check once."""
    recorder = recorder_at(now, registry)
    recorder.status.update("job", started_at=now - 60, active=False)  # stopped: a heal need not wait for it
    checks = build_checks(recorder, config.checks, config=config)
    checks.named("desync").run()


def test_heals_of_two_daemon_runs_are_both_in_the_history(backend, tmp_path) -> None:
    cluster, uri, root = backend
    q, c, location = job_with_checkpoint(cluster, root, tmp_path / "cp", {0: {0: 9, 1: 9}, 1: {0: 19, 1: 19}},
                                         committed=1, consumer_at=10)
    config = config_for(uri, q, c, location)
    path = history_paths(config)["job"]
    assert path == f"{c}_tuning_history"

    heal_once(config, 1000.0)
    cluster.insert_rows(q, [{"data": "x", "n": i} for i in range(40)])  # 20 more rows per partition
    write_checkpoint(Path(location), q, {2: {0: 29, 1: 29}, 3: {0: 39, 1: 39}}, committed=3, consumer=c)
    heal_once(config, 2000.0)

    kept = read_history(cluster, path, "job")
    assert [(e.at, e.kind, e.outcome, e.before, e.after) for e in kept] == [
        (2000.0, HistoryKind.HEAL, "healed", {"0": 20, "1": 20}, {"0": 40, "1": 40}),
        (1000.0, HistoryKind.HEAL, "healed", {"0": 10, "1": 10}, {"0": 20, "1": 20})]
    assert cluster.get_consumer_offsets(c, q) == {0: 40, 1: 40}


def test_a_failed_append_is_logged_and_counted_and_the_heal_still_happens(yt, yt_root, cluster_uri, tmp_path) -> None:
    q, c, location = job_with_checkpoint(yt, yt_root, tmp_path / "cp", {0: {0: 9, 1: 9}, 1: {0: 19, 1: 19}},
                                         committed=1, consumer_at=10)
    taken = f"{yt_root}/taken"
    yt.create("document", taken, attributes={"value": {}})  # a node that is no table where the history should go
    registry = CollectorRegistry()

    with capture_logs() as logs:
        heal_once(config_for(cluster_uri, q, c, location, history_path=taken), 1000.0, registry)

    assert yt.get_consumer_offsets(c, q) == {0: 20, 1: 20}
    assert registry.get_sample_value("opsd_history_append_failures_total", {"query": "job"}) == 1
    assert [e["path"] for e in logs if e["event"] == "history_append_failed"] == [taken]


# -- opsd history -----------------------------------------------------------------------------------------------


def test_opsd_history_prints_newest_first_at_80_columns_and_json(yt, yt_root, cluster_uri, tmp_path, capsys,
                                                                 monkeypatch) -> None:
    q, c, location = job_with_checkpoint(yt, yt_root, tmp_path / "cp", {0: {0: 9, 1: 9}, 1: {0: 19, 1: 19}},
                                         committed=1, consumer_at=10)
    config = config_for(cluster_uri, q, c, location)
    config_file = tmp_path / "opsd.yaml"
    config_file.write_text(yaml.safe_dump(config.model_dump(exclude_none=True)))
    HistoryLog(history_paths(config), recorder_at(0.0), 10).record(yt, [
        entry("job", 1_700_000_000.0, after=200_000), entry("job", 1_700_000_100.0, before=200_000, after=100_000)])
    monkeypatch.setenv("COLUMNS", "80")

    assert main(["history", "job", "--config", str(config_file)]) == 0
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 80
    assert out.index("200000 -> 100000") < out.index("1 -> 200000")
    assert "2023-11-14 22:15:00" in out and TuneReason.FAST_BATCHES.words in out and "fast_batches" not in out

    monkeypatch.setenv("COLUMNS", "200")
    assert main(["history", "job", "--config", str(config_file)]) == 0
    assert "before -> after" in capsys.readouterr().out.splitlines()[1]  # a table's header row

    assert main(["history", "job", "--checkpoint", location, "--json", "--cluster", cluster_uri]) == 0
    found = json.loads(capsys.readouterr().out)
    assert [(e["kind"], e["before"], e["after"]) for e in found] == [("tuner", 200_000, 100_000),
                                                                      ("tuner", 1, 200_000)]
    assert found[0]["inputs"] == {"batch_id": 7, "oom_risk": None}


# -- the tuner ----------------------------------------------------------------------------------------------------


class FinishedQuery:
    def awaitTermination(self, timeout: float) -> bool:
        return True


def test_the_tuners_cap_before_a_start_and_its_cut_after_a_memory_failure_are_kept(yt, yt_root, cluster_uri) -> None:
    config = OpsdConfig.model_validate({"cluster": cluster_uri, "pipelines": [{
        "name": "p", "source": {"path": f"{yt_root}/q", "options": {"consumer_path": f"{yt_root}/c"}},
        "sink": {"format": "console"}, "trigger": {"processing_time": "10s"},
        "restart": {"initial_backoff_seconds": 0.01}}]})
    recorder = recorder_at(3000.0)
    recorder.status.update("p", trigger_interval_seconds=10.0, recent_batches=(
        BatchSummary(0, 400_000, 200_000, 9.0, {"addBatch": 8.0}),))
    history = HistoryLog(history_paths(config), recorder, 10)
    tuner = AutotuneCheck(recorder, PositionsCollector(cluster_uri), autotune_targets(config), history)
    starts = []

    def start(spark, pipeline):
        starts.append(pipeline.name)
        if len(starts) == 1:
            raise RuntimeError("org.apache.spark.SparkException: Task failed: java.lang.OutOfMemoryError: Java heap")
        return FinishedQuery()

    supervisor = Supervisor(None, config.pipelines[0], recorder, start=start, before_start=[tuner.before_start])
    supervisor.start()
    assert supervisor.finished.wait(10)
    tuner.run()  # holds (stabilising): nothing more is kept

    kept = read_history(yt, f"{yt_root}/c_tuning_history", "p")
    assert [(e.kind, e.subject, e.outcome, e.reason, e.before, e.after) for e in kept] == [
        (HistoryKind.TUNER, "max_rows_per_partition", "applied", "memory_failure", 100_000, 50_000),
        (HistoryKind.TUNER, "max_rows_per_partition", "applied", "first_batch_safe", None, 100_000)]
    assert kept[0].inputs["partition_rows"] == 200_000 and kept[0].inputs["mode"] == "apply"


@pytest.mark.hostile
def test_a_damaged_row_fails_opsd_history_with_its_table_row_and_field(yt, yt_root, cluster_uri, capsys) -> None:
    path = f"{yt_root}/history"
    HistoryLog({"job": path}, recorder_at(0.0), 10).record(yt, [entry("job", 5.0)])
    yt.insert_rows(path, [{"query": "job", "id": 9_000_000, "at": 9.0, "kind": "tuner", "subject": "s",
                           "outcome": "applied", "reason": "\x1b]0;owned\x07", "before": "1", "after": "[oops",
                           "inputs": "{}"}])

    assert main(["history", "job", "--path", path, "--cluster", cluster_uri]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"opsd: error: {path}: row (query='job', id=9000000): field 'after' is not JSON")
    assert "Traceback" not in err and "\x1b" not in err
