"""`opsd doctor` on a queue's trimming: rows its auto-trim is about to delete before the query read them, and a vital
consumer holding the trimming back; each finding's advised `opsd` command, run, resolves it."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry

from opsd.checks.trim.check import TrimCheck
from opsd.checks.vital.check import VitalConsumerCheck
from opsd.cli.main import main
from opsd.collect.positions import PositionsCollector, QueryTarget
from opsd.config.thresholds import VITAL_CONSUMER_STALLED_SECONDS
from opsd.observe.recorder import Recorder
from opsd.observe.status import QueryStatus, StatusStore
from opsd.results.trim import PartitionTrim, QueueTrim, TrimOutlook, TrimRule
from opsd.telemetry.http import OpsHttpServer
from opsd.telemetry.metrics import Metrics
from streaming_core.auto_trim import AutoTrimConfig
from streaming_core.cluster.embedded.auto_trimmer import AutoTrimmer
from tests.support.doctor import advised_commands, doctor
from tests.support.retention import Clock, retention_job


def test_a_pending_trim_of_unread_rows_needs_action_and_registering_the_consumer_vital_keeps_them(
        yt, yt_root, tmp_path, cluster_uri, capsys) -> None:
    job = retention_job(yt, yt_root, tmp_path / "cp", config=AutoTrimConfig(True, 5))  # 10 unread, 5 kept
    code, report = shown = doctor(capsys, "--json", "--checkpoint", job.location, "--cluster", cluster_uri)
    [finding] = [f for f in report["queries"][job.location]["findings"] if "auto-trim" in f["what"]]
    [register, *_] = advised_commands(finding["advice"])

    assert (code, finding["severity"]) == (1, "action"), shown
    assert "from partitions 0, 1 at the Queue Agent's next pass" in finding["what"]
    assert "held longest by retained_rows" in finding["what"]
    assert register == ["consumer", "register", job.queue, job.consumer, "--vital", "--cluster", cluster_uri]
    assert main(register) == 0
    capsys.readouterr()
    AutoTrimmer(yt, clock=Clock()).run_pass([job.queue])
    assert [t.trimmed_row_count for t in yt.get_tablet_infos(job.queue)] == [10, 10]  # only the rows it read
    code, report = doctor(capsys, "--json", "--checkpoint", job.location, "--cluster", cluster_uri)
    assert code == 0 and report["queries"][job.location]["facts"]["trim"][job.queue]["partitions"]["0"][
        "outlook"] == "consumer_vital"


def test_a_daemons_stalled_vital_consumer_of_another_job_needs_action_naming_it(yt, yt_root, tmp_path, cluster_uri,
                                                                                 capsys) -> None:
    job = retention_job(yt, yt_root, tmp_path / "cp", other_at=2, config=None)
    recorder, clock = Recorder(Metrics(CollectorRegistry()), StatusStore()), Clock()
    positions = PositionsCollector(cluster_uri, [QueryTarget("job", job.location)], clock=clock)
    audit, trim = VitalConsumerCheck(recorder, positions), TrimCheck(recorder, positions)
    for _ in range(2):
        audit.run()
        trim.run()
        clock.advance(VITAL_CONSUMER_STALLED_SECONDS)
    server = OpsHttpServer(lambda: b"", status=recorder.status.to_json, host="127.0.0.1", port=0)
    server.start()
    try:
        code, report = doctor(capsys, "--json", "--url", server.url)
    finally:
        server.stop()

    [finding] = report["queries"]["job"]["findings"]
    [command] = advised_commands(finding["advice"])
    assert (code, finding["severity"]) == (1, "action")
    assert finding["what"] == (f"{job.queue}: vital consumer {job.other} (another job's consumer) has not moved for "
                               f"30 min while 36 rows wait for it: the queue cannot be trimmed past it, for any reader")
    assert command == ["consumer", "register", job.queue, job.other]
    assert main([*command, "--cluster", cluster_uri]) == 0
    capsys.readouterr()
    assert audit.run() == [] and recorder.status.get("job").vital_consumers == ()


@pytest.mark.parametrize("binding", [TrimRule.RETAINED_ROWS, TrimRule.RETAINED_LIFETIME])
def test_the_advice_raises_the_rule_that_holds_the_rows_longest_to_two_hours_of_growth(binding) -> None:
    from opsd.doctor.retention import retention_advice

    partition = PartitionTrim("//q", 0, TrimOutlook.APPROACHING, 600.0, 900, binding, 12.0, 2.0, at_risk=True)
    trim = QueueTrim("q", "//q", "//c", AutoTrimConfig(True, 1000, 3600.0),
                     (partition, replace(partition, partition=1, at_risk=False, eta_seconds=math.inf)))
    [(kind, _, what, advice)] = retention_advice(QueryStatus("q", trim={"//q": trim}))

    assert kind == "trim_soon" and "from partition 0 in about 10 min" in what
    expected = {"retained_rows": "retained_rows 72900 (now 1000", "retained_lifetime_duration":
                "retained_lifetime_duration 10800000 (now 3600000 ms"}[binding]
    assert f"yt set //q/@auto_trim_config/{expected}" in advice
    assert "12 rows/s written, 2 read" in advice
