"""Claims on a YTsaurus cluster (issue 32): a pipeline's Cypress checkpoint location and its consumer are claimed by an
exclusive Cypress lock of a master transaction opsd pings while it runs; a second opsd (another config file, another
process) naming either is refused before Spark starts, naming both pipelines and files; a claim of a process that
died expires with its transaction; a lost claim is reported once. Through the real `ytsaurus-client` and the stand-in
(three proxies behind its balancer, its transaction timeouts on a clock the tests move)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog.testing
import yaml
import yt.wrapper as yt
from prometheus_client import CollectorRegistry

from opsd.config.claims import LOCK_NAME, TITLE_PREFIX, ClaimError, claimed, claims
from opsd.config.load import load_config
from opsd.observe.recorder import Recorder
from opsd.observe.status import StatusStore
from opsd.runtime.daemon import LostClaims
from opsd.telemetry.metrics import Metrics
from streaming_core.cluster import ClusterError, yt_proxy
from streaming_core.cluster.ytsaurus.claims import ClaimTiming
from streaming_core.cluster.ytsaurus.client import default_client_factory
from tests.support.claims import start_holder
from tests.support.daemon import OPSD
from tests.support.standin import SteppedClock
from ytsaurus_standin import StandinProxy

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(60)]

#: The token of a user who may read everything and write nothing.
READER_TOKEN = "reader-token-Kd02"
#: Pings often, so that a lost claim is seen within a moment (the product pings every 10 s of its 30 s timeout).
QUICK = ClaimTiming(timeout_seconds=30.0, ping_period_seconds=0.05)


@pytest.fixture(scope="module")
def clock() -> SteppedClock:
    return SteppedClock()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory, clock: SteppedClock) -> Iterator[StandinProxy]:
    with StandinProxy(tmp_path_factory.mktemp("claims"), clock=clock) as served:
        yield served


def config(proxy: StandinProxy, folder: Path, file: str, pipeline: str, checkpoint: str, consumer: str) -> Path:
    path = folder / file
    path.write_text(yaml.safe_dump({"cluster": proxy.uri, "pipelines": [
        {"name": pipeline, "source": {"path": "//home/q", "options": {"consumer_path": consumer}},
         "sink": {"format": "console"}, "checkpoint_location": f"yt://{checkpoint}"}]}))
    return path


@pytest.fixture
def first(proxy: StandinProxy, tmp_path: Path) -> Path:
    """a.yaml: pipeline `a` on the Cypress checkpoint //home/<test>/cp-a and the consumer //home/<test>/consumer."""
    return config(proxy, tmp_path, "a.yaml", "a", f"/home/{tmp_path.name}/cp-a", f"//home/{tmp_path.name}/consumer")


def second_config(proxy: StandinProxy, tmp_path: Path, checkpoint: str, consumer: str) -> Path:
    return config(proxy, tmp_path, "b.yaml", "b", f"/home/{tmp_path.name}/{checkpoint}",
                  f"//home/{tmp_path.name}/{consumer}")


def test_claims_on_ytsaurus_are_cypress_nodes_beside_the_checkpoint_and_under_the_claims_root(first: Path) -> None:
    checkpoint, consumer = claims(load_config(first))
    assert checkpoint.node == f"//home/{first.parent.name}/cp-a/{LOCK_NAME}" and checkpoint.lock is None
    assert consumer.node is not None and consumer.node.startswith("//tmp/opsd-claims/consumer-")


@pytest.mark.parametrize(("checkpoint", "consumer", "kind"), [
    ("cp-a", "other", "checkpoint location"),
    ("cp-b", "consumer", "consumer"),
])
def test_a_second_opsd_sharing_a_cypress_checkpoint_or_a_consumer_is_refused_naming_both(
        proxy, first: Path, tmp_path: Path, checkpoint: str, consumer: str, kind: str) -> None:
    second = second_config(proxy, tmp_path, checkpoint, consumer)
    with claimed(load_config(first), first):
        with pytest.raises(ClaimError) as error, claimed(load_config(second), second):
            pass
        with claimed(load_config(first).model_copy(update={"pipelines": []}), first):
            pass  # nothing claimed: nothing refused
    [problem] = error.value.problems
    assert f"pipeline 'b' of {second}" in problem and f"pipeline 'a' of {first}" in problem
    assert f"share the {kind}" in problem and f"pid {os.getpid()}" in problem
    with claimed(load_config(second), second):  # released with the first's end
        pass


def test_opsd_run_with_the_second_config_is_refused_before_spark_starts(proxy, first: Path, tmp_path: Path) -> None:
    second = second_config(proxy, tmp_path, "cp-a", "other")
    with claimed(load_config(first), first):
        result = subprocess.run([*OPSD, "run", str(second)], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0 and "share the checkpoint location" in result.stderr, result.stderr
    assert "pipeline 'a'" in result.stderr and "SparkContext" not in result.stderr


def test_the_claim_of_an_opsd_that_died_ends_with_its_transaction_timeout(
        proxy, first: Path, tmp_path: Path, clock: SteppedClock) -> None:
    holder = start_holder(first)
    try:
        holder.send_signal(signal.SIGKILL)  # no release: the pings just stop
        holder.wait(10)
    finally:
        if holder.poll() is None:
            holder.kill()
    second = second_config(proxy, tmp_path, "cp-a", "consumer")
    with pytest.raises(ClaimError, match=f"pid {holder.pid}"), claimed(load_config(second), second):
        pass
    clock.advance(31)  # past the claim's 30 s without a ping: YTsaurus aborts the transaction
    with claimed(load_config(second), second) as held:
        assert {c.kind for c in held} == {"checkpoint location", "consumer"}


def test_a_claim_lost_while_held_stops_the_daemon_counted_once_and_another_may_take_it(
        proxy, first: Path, tmp_path: Path) -> None:
    stop = threading.Event()
    lost, recorder = LostClaims(stop), Recorder(Metrics(CollectorRegistry()), StatusStore())
    lost.count_in(recorder)
    admin = yt.YtClient(proxy=proxy.uri.removeprefix("yt://"), config={"proxy": {"retries": {"enable": False}}})
    with structlog.testing.capture_logs() as logs, claimed(load_config(first), first, lost, timing=QUICK) as held:
        checkpoint = next(c for c in held if c.kind == "checkpoint location")
        [holding] = proxy.state.commands.locks.of(checkpoint.node)
        admin.abort_transaction(holding.transaction)  # an administrator aborts the claim's transaction
        assert stop.wait(10), "the daemon told to stop"
        second = second_config(proxy, tmp_path, "cp-a", "other")
        with claimed(load_config(second), second):
            pass
    assert [c.kind for c in lost.lost] == ["checkpoint location"]
    assert recorder.metrics.registry.get_sample_value(
        "opsd_claims_lost_total", {"query": "a", "kind": "checkpoint location"}) == 1
    [event] = [e for e in logs if e["event"] == "claim_lost"]
    assert event["query"] == "a" and event["what"] == checkpoint.what


def test_a_crafted_title_of_the_holder_is_shown_escaped_and_bounded(proxy, first: Path) -> None:
    client = yt.YtClient(proxy=proxy.uri.removeprefix("yt://"), config={"proxy": {"retries": {"enable": False}}})
    checkpoint = next(c for c in claims(load_config(first)) if c.kind == "checkpoint location")
    assert checkpoint.node is not None
    client.create("map_node", checkpoint.node, recursive=True, ignore_existing=True)
    crafted = TITLE_PREFIX + '{"pipeline": "\\u001b]0;pwned\\u0007' + "x" * 1000 + '", "config": "/etc/x", "pid": 1}'
    tx = client.start_transaction(timeout=30_000, attributes={"title": crafted})
    with client.Transaction(transaction_id=tx):
        client.lock(checkpoint.node)
    try:
        with pytest.raises(ClaimError) as error, claimed(load_config(first), first):
            pass
    finally:
        client.abort_transaction(tx)
    assert "\x1b" not in str(error.value) and "/etc/x" in str(error.value) and len(str(error.value)) < 1500


def test_a_claim_node_opsd_may_not_create_is_a_cluster_error_naming_it_without_the_token(tmp_path: Path) -> None:
    with StandinProxy(tmp_path / "cluster", token="root-Zq81", users={READER_TOKEN: "reader"}) as guarded:
        path = config(guarded, tmp_path, "a.yaml", "a", "/home/team/cp", "//home/team/consumer")
        with pytest.raises(ClusterError, match=r"//home/team/cp/opsd\.lock") as error, \
                claimed(load_config(path), path, yt_client=lambda uri: default_client_factory(
                    yt_proxy(uri)[0], READER_TOKEN, None)):
            pass
    assert READER_TOKEN not in str(error.value)
