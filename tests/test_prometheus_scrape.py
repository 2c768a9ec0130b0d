"""A real Prometheus server scrapes opsd's /metrics and serves the recorded values from its API."""

from __future__ import annotations

import pytest

from opsd.telemetry.http import OpsHttpServer
from tests.support.prometheus import PROMETHEUS, query_until_present

pytestmark = pytest.mark.skipif(
    PROMETHEUS is None, reason="the `prometheus` binary is not installed (Debian package `prometheus`)"
)


def test_prometheus_scrapes_opsd_metrics(prometheus: str, opsd_server: OpsHttpServer) -> None:
    [series] = query_until_present(prometheus, "opsd_input_rows_total")

    assert series["metric"]["query"] == "clicks"
    assert series["metric"]["job"] == "opsd"
    assert float(series["value"][1]) == 1234

    [backlog] = query_until_present(prometheus, 'opsd_source_backlog_rows{queue="//home/q"}')
    assert (backlog["metric"]["partition"], float(backlog["value"][1])) == ("0", 56)

    [up] = query_until_present(prometheus, "up")
    assert up["value"][1] == "1"
