"""A real Prometheus scrapes the desync and lag metrics that the checks recorded from a real embedded cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from opsd.checks.desync.check import DesyncCheck
from opsd.checks.lag.check import LagCheck
from opsd.collect.positions import PositionsCollector, QueryTarget
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.telemetry.http import OpsHttpServer
from opsd.telemetry.metrics import Metrics
from tests.support.checkpoint import job_with_checkpoint
from tests.support.prometheus import PROMETHEUS, query_until_present

pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason="the `prometheus` binary is not installed")


@pytest.fixture
def opsd_server(yt, yt_root: str, cluster_uri: str, tmp_path: Path) -> Iterator[OpsHttpServer]:
    """opsd's endpoint after one desync run (healing a lagging consumer) and two lag runs 10 s apart."""
    q, c, location = job_with_checkpoint(yt, yt_root, tmp_path / "cp", {0: {0: 9, 1: 9}, 1: {0: 19, 1: 19}},
                                         committed=1, consumer_at=10)
    metrics = Metrics(CollectorRegistry())
    recorder = Recorder(metrics, StatusStore())
    now = [1000.0]
    targets = [QueryTarget("job", location, q, c, heal=True)]
    lag = LagCheck(recorder, PositionsCollector(cluster_uri, targets, clock=lambda: now[0]))
    lag.run()
    DesyncCheck(recorder, PositionsCollector(cluster_uri, targets)).run()
    yt.insert_rows(q, [{"data": "x", "n": i} for i in range(20)])
    now[0] += 10
    lag.run()
    server = OpsHttpServer(metrics.render, host="127.0.0.1", port=0)
    server.start()
    yield server
    server.stop()


def value(base_url: str, promql: str) -> float:
    [series] = query_until_present(base_url, promql)
    return float(series["value"][1])


def test_prometheus_sees_desync_heals_backlog_lag_and_time_to_drain(prometheus: str) -> None:
    assert value(prometheus, 'opsd_desync_state{query="job",partition="0",state="lagging_one_batch"}') == 1
    assert value(prometheus, 'opsd_desync_rows{query="job",partition="1"}') == 10
    assert value(prometheus, 'opsd_desync_heals_total{query="job",outcome="healed"}') == 1
    assert value(prometheus, 'sum(opsd_queue_unread_rows{query="job"})') == 20
    assert value(prometheus, 'opsd_queue_lag_seconds{query="job",partition="0"}') == 9
    assert value(prometheus, 'opsd_queue_input_rows_per_second{query="job"}') == 2
    assert value(prometheus, 'opsd_time_to_drain_seconds{query="job"}') == float("inf")
