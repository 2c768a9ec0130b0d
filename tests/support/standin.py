"""The YTsaurus HTTP proxy stand-in for tests: one per test session, with a token, over HTTP; HTTPS on demand.

Loaded as a pytest plugin by `conftest.py`. `standin` serves an embedded cluster of its own through HTTP API v4 as
`ytsaurus-client` speaks it; `standin_cluster` is a `YtsaurusCluster` connected to it through the real client.
`tls_proxy(root)` starts one that serves HTTPS with a certificate from a CA made for the test (`trustme`), and
`open_standin` is one, without a token, for the test run's shared Spark session.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yt.yson as yson
from pyspark.sql import SparkSession

from streaming_core.cluster import Cluster, connect
from tests.support.sink import session_conf
from ytsaurus_standin import StandinProxy

#: The token the session's stand-in requires; distinctive, so that tests can grep output for it.
STANDIN_TOKEN = "standin-token-7Hq2xZ9w"
#: How long the session's stand-ins hide a fresh registration: strict as YTsaurus (refused, then seen; the backend
#: waits it out) but shorter than YTsaurus' 10 s, which `test_ytsaurus_facts` proves, so that the many tests that
#: register a consumer and read at once stay fast.
SESSION_REGISTRATION_DELAY_SECONDS = 0.5
#: ... and how long a backend connected to them waits for a registration before calling it missing (the product's
#: `registration_visible_within_seconds` is YTsaurus' 10 s and a margin), so a test of a missing one stays short.
SESSION_REGISTRATION_WAIT_SECONDS = SESSION_REGISTRATION_DELAY_SECONDS + 1.5
#: How long the session's stand-ins keep a mount or an unmount in progress (twice that a remount's mount caches
#: stale): asynchronous as in YTsaurus (the client polls `@tablet_state` every 0.1 s, a stale cache answers 1701 and
#: is retried), without the 0.3 s per step that the many tests resharding a queue through them would wait.
SESSION_TABLET_STATE_SECONDS = 0.05


#: `ytsaurus-client`'s own configuration for the test run (`YT_CONFIG_PATCHES`, inherited by every child process:
#: Spark's workers, the CLI, fault drivers): its retry loops back off from 0.1 s instead of 2-30 s (5 s for dynamic
#: tables), so that a call the stand-in refuses for a moment, as YTsaurus does (a 503, a stale mount cache after a
#: remount: 1701), is answered on a retry within a second; and a transaction's pinger looks every 20 ms instead of
#: 100 ms whether it is stopped (each commit waits for it). Which errors are retried, and for how long at most
#: (`OPSD_YT_RETRY_SECONDS`), stays as the product configures it.
CLIENT_BACKOFF = {"backoff": {"exponential_policy": {"start_timeout": 100, "max_timeout": 1000}}}
CLIENT_CONFIG_PATCHES = yson.dumps({
    "proxy": {"retries": CLIENT_BACKOFF}, "transaction_sleep_period": 20,
    **dict.fromkeys(("dynamic_table_retries", "read_retries", "write_retries"), CLIENT_BACKOFF),
}, yson_format="text").decode()


def pytest_configure(config: pytest.Config) -> None:
    """The client's retry backoffs for the whole run (a user's own `YT_CONFIG_PATCHES` is kept as it is)."""
    os.environ.setdefault("YT_CONFIG_PATCHES", CLIENT_CONFIG_PATCHES)


@pytest.fixture(scope="session")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandinProxy]:
    with StandinProxy(tmp_path_factory.mktemp("standin"), token=STANDIN_TOKEN,
                      registration_delay_seconds=SESSION_REGISTRATION_DELAY_SECONDS,
                      tablet_state_seconds=SESSION_TABLET_STATE_SECONDS) as proxy:
        yield proxy


@pytest.fixture(scope="session")
def open_standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandinProxy]:
    """A stand-in over HTTPS (its `uri` names the CA bundle) that asks for no token: for the Spark session shared
    by the whole test run, whose Python workers were started before any test could hand them a `YT_TOKEN`."""
    with tls_proxy(tmp_path_factory.mktemp("open-standin")) as (proxy, _):
        yield proxy


@pytest.fixture
def standin_cluster(standin: StandinProxy) -> Iterator[Cluster]:
    with connect(standin.uri, token=STANDIN_TOKEN) as cluster:
        cluster.registration_visible_within_seconds = SESSION_REGISTRATION_WAIT_SECONDS
        yield cluster


@contextlib.contextmanager
def tls_proxy(root: Path, **kwargs) -> Iterator[tuple[StandinProxy, str]]:
    """A stand-in serving HTTPS, and the PEM file of the CA that signed its certificate (a registration seen after
    `SESSION_REGISTRATION_DELAY_SECONDS`, mounts in `SESSION_TABLET_STATE_SECONDS`, unless `kwargs` say otherwise)."""
    kwargs.setdefault("registration_delay_seconds", SESSION_REGISTRATION_DELAY_SECONDS)
    kwargs.setdefault("tablet_state_seconds", SESSION_TABLET_STATE_SECONDS)
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    root.mkdir(parents=True, exist_ok=True)
    cert_file, key_file, ca_file = root / "proxy.pem", root / "proxy.key", root / "ca.pem"
    cert.cert_chain_pems[0].write_to_path(str(cert_file))
    for pem in cert.cert_chain_pems[1:]:
        pem.write_to_path(str(cert_file), append=True)
    cert.private_key_pem.write_to_path(str(key_file))
    ca.cert_pem.write_to_path(str(ca_file))
    with StandinProxy(root / "cluster", tls=(str(cert_file), str(key_file)), ca_bundle=str(ca_file),
                      **kwargs) as proxy:
        yield proxy, str(ca_file)


class SteppedClock:
    """A stand-in's clock (`StandinProxy(clock=...)`) that a test moves on: monotonic time plus the steps taken, so
    that a delay of YTsaurus' own length (10 s of a registration cache) passes at once, at the moment the test picks."""

    def __init__(self) -> None:
        self._offset = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return time.monotonic() + self._offset

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._offset += seconds


#: The Hadoop setting (in a session's conf, as `session_conf` sets it) that maps `yt:///` paths onto a local root.
YT_PATHS_ROOT = "fs__viewfs__mounttable__default__linkFallback"


def spark_backend(request: pytest.FixtureRequest, spark: SparkSession, cluster_uri: str) -> Iterator[Cluster]:
    """For a fixture parametrized `embedded` / `ytsaurus`: the cluster a Spark query runs on, the run's embedded one or
    the stand-in through `ytsaurus-client` (the session's `spark.yt.cluster` names it meanwhile, and `yt:///`
    checkpoint locations map onto the stand-in's storage, where its Cypress file commands serve them: what SPYT's file
    system does on a real cluster)."""
    if request.param == "embedded":
        with connect(cluster_uri) as cluster:
            yield cluster
        return
    proxy = request.getfixturevalue("open_standin")
    with session_conf(spark, spark__yt__cluster=proxy.uri, **{YT_PATHS_ROOT: f"file://{proxy.root}"}), \
            connect(proxy.uri) as cluster:
        yield cluster
