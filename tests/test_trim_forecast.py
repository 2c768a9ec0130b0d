"""The trim forecast and the embedded auto-trimmer on the embedded cluster: the trimmer trims a queue by its
`@auto_trim_config` as YTsaurus' Queue Agent does (up to the vital consumers, keeping `retained_rows` and the rows
younger than `retained_lifetime_duration`), and the trim check predicts, before the loss, when that deletes rows a
query has not read; driven by one clock the test moves."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry

from opsd.checks.lag.check import LagCheck
from opsd.checks.trim.check import TrimCheck
from opsd.collect.positions import PositionsCollector, QueryTarget
from opsd.config.thresholds import TRIM_ETA_SHORT_SECONDS
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore, jsonable
from opsd.results.trim import TrimOutlook
from opsd.telemetry.metrics import Metrics
from streaming_core.auto_trim import AutoTrimConfig, trim_limit
from streaming_core.cluster.embedded.auto_trimmer import AutoTrimmer
from streaming_core.cluster.ytsaurus.queues import QUEUE_AGENT_CONFIG
from tests.support.retention import Clock, retention_job
from ytsaurus_standin.queue_agent import AUTOMATIC_TRIMMING_ON


@pytest.fixture
def recorder() -> Recorder:
    return Recorder(Metrics(CollectorRegistry()), StatusStore())


def trimmed(yt, queue: str) -> list[int]:
    return [t.trimmed_row_count for t in yt.get_tablet_infos(queue)]


# -- the rule and the attribute ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "field"), [
    ({"enable": "yes"}, "enable"), ({"enable": True, "retained_rows": -1}, "retained_rows"),
    ({"enable": True, "retained_lifetime_duration": 1500}, "retained_lifetime_duration"),
    ({"enable": True, "retain": 5}, "'retain'"), ([1, 2], "expected a map"),
])
def test_a_bad_auto_trim_config_is_refused_naming_the_queue_and_field(value, field) -> None:
    with pytest.raises(ValueError, match=f"//q/@auto_trim_config.*{field}"):
        AutoTrimConfig.from_yt("//q", value)


def test_the_trim_limit_is_the_slowest_vital_consumer_capped_by_what_retention_keeps() -> None:
    config = AutoTrimConfig(True, retained_rows=10, retained_lifetime_seconds=60)
    assert trim_limit(config, row_count=100, vital_offsets=[70, 40], written_before_barrier=95) == 40
    assert trim_limit(config, row_count=100, vital_offsets=[95], written_before_barrier=99) == 90
    assert trim_limit(config, row_count=100, vital_offsets=[95], written_before_barrier=30) == 30
    assert trim_limit(config, row_count=100, vital_offsets=[], written_before_barrier=100) is None
    assert trim_limit(AutoTrimConfig(False), row_count=100, vital_offsets=[95], written_before_barrier=None) is None


# -- the embedded auto-trimmer --------------------------------------------------------------------------------------


def test_the_auto_trimmer_trims_to_the_vital_consumer_but_keeps_the_retained_rows(yt, yt_root, tmp_path) -> None:
    job = retention_job(yt, yt_root, tmp_path / "cp", rows=60, other_at=25, config=AutoTrimConfig(True, 10))
    trimmer = AutoTrimmer(yt, clock=Clock())

    trims = trimmer.run_pass([job.queue])  # this test's queue only: the session's cluster holds other tests' queues

    assert [(t.partition, t.before, t.after) for t in trims] == [(0, 0, 20), (1, 0, 20)]  # 30 - 10 kept
    assert trimmed(yt, job.queue) == [20, 20]  # past the job's consumer at 10: rows [10, 20) are lost to it
    yt.set(f"{job.queue}/@auto_trim_config/retained_rows", 2)  # a key inside the attribute, as `yt set` does
    trimmer.run_pass([job.queue])
    assert trimmed(yt, job.queue) == [25, 25]  # now the vital consumer holds it


def test_the_auto_trimmer_trims_nothing_without_a_vital_consumer_or_with_trimming_off(yt, yt_root, tmp_path) -> None:
    job = retention_job(yt, yt_root, tmp_path / "cp", other_vital=False)
    off = retention_job(yt, f"{yt_root}/off", tmp_path / "cp2", config=AutoTrimConfig(False))
    assert AutoTrimmer(yt, clock=Clock()).run_pass([job.queue, off.queue]) == []
    assert trimmed(yt, job.queue) == trimmed(yt, off.queue) == [0, 0]


def test_the_auto_trimmer_keeps_the_rows_younger_than_the_lifetime_by_its_clock(yt, yt_root, tmp_path) -> None:
    schema = [{"name": "$timestamp", "type": "uint64"}, {"name": "data", "type": "string"},
              {"name": "n", "type": "int64"}]
    queue, other = f"{yt_root}/queue", f"{yt_root}/other"
    yt.create("table", queue, attributes={"dynamic": True, "tablet_count": 1, "schema": schema})
    yt.create_consumer(other)
    yt.register_queue_consumer(queue, other, vital=True)
    yt.insert_rows(queue, [{"data": "old", "n": i} for i in range(5)])
    [old] = next(yt.read_tablet(queue, 0, 4, 5, columns=["$timestamp"])).column(0).to_pylist()
    yt.insert_rows(queue, [{"data": "new", "n": i} for i in range(3)])
    [new] = next(yt.read_tablet(queue, 0, 5, 6, columns=["$timestamp"])).column(0).to_pylist()
    yt.advance_consumer(other, queue, 0, None, 8)
    yt.set(f"{queue}/@auto_trim_config", {"enable": True, "retained_lifetime_duration": 60_000})
    clock = Clock(old / 1e6 + 59)
    trimmer = AutoTrimmer(yt, clock=clock)

    assert trimmer.run_pass([queue]) == []  # the oldest row is 59 s old
    clock.now = old / 1e6 + 60.5
    trimmer.run_pass([queue])
    assert trimmed(yt, queue) == [5 if new / 1e6 + 60 > clock.now else 8]


# -- the forecast --------------------------------------------------------------------------------------------------


def forecast_setup(yt, yt_root, tmp_path, recorder, **job) -> tuple:
    job_ = retention_job(yt, yt_root, tmp_path / "cp", **job)
    clock = Clock()
    positions = PositionsCollector(yt.uri, [QueryTarget("job", job_.location)], clock=clock)
    return job_, clock, TrimCheck(recorder, positions), AutoTrimmer(yt, clock=clock)


def test_the_forecast_predicts_when_the_retained_rows_stop_covering_the_unread_rows_and_it_comes_true(
        yt, yt_root, tmp_path, recorder) -> None:
    """20 rows per partition, the job's next row 10, retained_rows 30: 10 unread, 21 rows of room. At 2 rows a second
    per partition written (the other job, vital, reads them all; this job reads nothing) the 31st unread row, and
    with it the job's next row, is trimmable in 10.5 s."""
    job, clock, check, trimmer = forecast_setup(yt, yt_root, tmp_path, recorder, config=AutoTrimConfig(True, 30))
    [first] = check.run()
    assert {p.outlook for p in first.partitions} == {TrimOutlook.UNKNOWN}  # one reading: no rate yet
    for _ in range(2):  # 2 rows per second and partition, for 5 seconds each time
        clock.advance(5)
        job.produce(yt, 10)
        job.other_reads_to(yt, yt.get_tablet_infos(job.queue)[0].total_row_count)
        [trim] = check.run()
    p0 = trim.partitions[0]
    assert (p0.outlook, p0.binding, p0.unread_rows, p0.write_rows_per_second) == \
        (TrimOutlook.APPROACHING, "retained_rows", 30, 2.0)
    assert p0.eta_seconds == pytest.approx(0.5) and p0.at_risk  # 31 unread rows in half a second
    labels = {"query": "job", "queue": job.queue, "partition": "0"}
    assert recorder.metrics.registry.get_sample_value("opsd_queue_trim_eta_seconds", labels) == pytest.approx(0.5)
    trimmer.run_pass([job.queue])
    assert trimmed(yt, job.queue) == [10, 10]  # only the rows the job has read: the retained 30 are [10, 40)
    clock.advance(0.5)
    job.produce(yt, 1)
    job.other_reads_to(yt, 41)
    trimmer.run_pass([job.queue])
    assert trimmed(yt, job.queue) == [11, 11]  # half a second on, the retained rows are [11, 41): row 10 is lost
    assert recorder.status.get("job").trim[job.queue].partitions[0].at_risk


def test_a_trim_point_already_past_the_next_row_is_pending(yt, yt_root, tmp_path, recorder) -> None:
    job, _, check, trimmer = forecast_setup(yt, yt_root, tmp_path, recorder, config=AutoTrimConfig(True, 5))
    [trim] = check.run()
    assert [(p.outlook, p.eta_seconds, p.at_risk) for p in trim.partitions] == [(TrimOutlook.PENDING, 0.0, True)] * 2
    assert jsonable(trim)["partitions"]["0"]["outlook"] == "pending"
    trimmer.run_pass([job.queue])
    assert trimmed(yt, job.queue) == [15, 15]  # as forecast: past the job's next row 10


@pytest.mark.parametrize(("job", "outlook"), [
    ({"config": None}, TrimOutlook.NO_AUTO_TRIM),
    ({"config": AutoTrimConfig(False)}, TrimOutlook.NO_AUTO_TRIM),
    ({"other_vital": False}, TrimOutlook.NO_VITAL_CONSUMER),
])
def test_nothing_is_at_risk_where_the_queue_agent_does_not_trim(yt, yt_root, tmp_path, recorder, job, outlook):
    _, _, check, _ = forecast_setup(yt, yt_root, tmp_path, recorder, **job)
    [trim] = check.run()
    assert [(p.outlook, p.eta_seconds, p.at_risk) for p in trim.partitions] == [(outlook, math.inf, False)] * 2


def test_a_vital_consumer_of_its_own_is_never_at_risk_and_a_slow_other_vital_consumer_holds_rows(
        yt, yt_root, tmp_path, recorder) -> None:
    job, clock, check, _ = forecast_setup(yt, yt_root, tmp_path, recorder, config=AutoTrimConfig(True, 0), other_at=4)
    check.run()
    clock.advance(10)
    job.produce(yt, 100)
    [still] = check.run()  # the other vital consumer, at 4, stands still: it holds every row for the job
    assert (still.partitions[0].outlook, still.partitions[0].binding) == (TrimOutlook.NOT_APPROACHING,
                                                                          "vital_consumers")
    yt.register_queue_consumer(job.queue, job.consumer, vital=True)
    job.other_reads_to(yt, 100)
    clock.advance(10)
    [own] = check.run()
    assert {(p.outlook, p.eta_seconds) for p in own.partitions} == {(TrimOutlook.CONSUMER_VITAL, math.inf)}


def test_the_lifetime_rule_closes_on_the_next_rows_age_from_the_lag_check(yt, yt_root, tmp_path, recorder) -> None:
    """A queue without `$timestamp`: the next row's age comes from the lag check's sampled history, which knows the
    rows before its first sample only as at least that old; the forecast then runs the lifetime down from it."""
    _, clock, check, _ = forecast_setup(yt, yt_root, tmp_path, recorder,
                                        config=AutoTrimConfig(True, retained_lifetime_seconds=120))
    lag = LagCheck(recorder, check.positions)
    for _ in range(3):
        lag.run()
        [trim] = check.run()
        clock.advance(30)
    ages = [p.lag_seconds for p in recorder.status.get("job").lag.partitions]
    assert ages == [60.0, 60.0]  # the first sample's rows, seen 60 s ago
    p0 = trim.partitions[0]
    assert (p0.outlook, p0.binding, p0.eta_seconds) == (TrimOutlook.APPROACHING, "retained_lifetime_duration", 60.0)
    assert p0.at_risk is (TRIM_ETA_SHORT_SECONDS > 60.0)


def test_through_the_ytsaurus_client_the_checks_read_the_auto_trim_config_and_vital_consumers(
        standin, standin_cluster, tmp_path, recorder, monkeypatch) -> None:
    """The attribute, a key inside it and the registrations cross the real client and the HTTP stand-in."""
    from opsd.checks.vital.check import VitalConsumerCheck
    from opsd.collect.positions import collect_retention
    from tests.support.standin import STANDIN_TOKEN

    root = f"//tmp/trim{tmp_path.name[-8:]}"
    standin_cluster.create("map_node", root, recursive=True)
    job = retention_job(standin_cluster, root, tmp_path / "cp", config=AutoTrimConfig(True, 5))
    standin_cluster.set(f"{job.queue}/@auto_trim_config/retained_rows", 4)
    assert standin_cluster.get(f"{job.queue}/@auto_trim_config/retained_rows") == 4

    retention = collect_retention(standin_cluster, job.queue)
    assert (retention.auto_trim, retention.problem) == (AutoTrimConfig(True, 4), None)
    assert [(v.consumer, dict(v.offsets)) for v in retention.vital] == [(job.other, {0: 20, 1: 20})]
    monkeypatch.setenv("YT_TOKEN", STANDIN_TOKEN)
    positions = PositionsCollector(standin.uri, [QueryTarget("job", job.location)], clock=Clock())
    [off] = TrimCheck(recorder, positions).run()  # the Queue Agent's automatic trimming is off by default
    assert [(p.outlook, p.eta_seconds, p.at_risk) for p in off.partitions] == [
        (TrimOutlook.CLUSTER_TRIMMING_OFF, math.inf, False)] * 2
    standin_cluster.set(QUEUE_AGENT_CONFIG, AUTOMATIC_TRIMMING_ON)
    try:
        [trim] = TrimCheck(recorder, positions).run()
    finally:
        standin_cluster.set(QUEUE_AGENT_CONFIG, {})
    [audit] = VitalConsumerCheck(recorder, positions).run()
    assert [(p.outlook, p.eta_seconds) for p in trim.partitions] == [(TrimOutlook.PENDING, 0.0)] * 2
    assert (audit.consumer, audit.waiting_rows) == (job.other, 0)


def test_a_standin_with_an_auto_trimmer_trims_a_queue_configured_through_the_ytsaurus_client(tmp_path) -> None:
    from streaming_core.cluster import connect
    from tests.support.wait import wait_until
    from ytsaurus_standin import StandinProxy

    with StandinProxy(tmp_path / "cluster", auto_trim_seconds=0.2, registration_delay_seconds=0.5) as proxy, \
            connect(proxy.uri) as cluster:
        cluster.create("map_node", "//tmp/agent", recursive=True)
        job = retention_job(cluster, "//tmp/agent", tmp_path / "cp", config=None, other_at=15)
        assert trimmed(cluster, job.queue) == [0, 0]
        cluster.set(QUEUE_AGENT_CONFIG, AUTOMATIC_TRIMMING_ON)
        cluster.set(f"{job.queue}/@auto_trim_config", {"enable": True, "retained_rows": 8})
        wait_until(lambda: trimmed(cluster, job.queue) == [12, 12], 30, "the stand-in's auto-trimmer to trim")
