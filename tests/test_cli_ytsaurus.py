"""Every `opsd` command that writes, run in-process against YTsaurus: the real client over HTTP to the stand-in
(`tests.support.standin`, its token in `YT_TOKEN`), each checked by reading the cluster back.

`desync heal` runs ten times in a row (each move is a tablet transaction, which YTsaurus keeps in the proxy that
started it) and reads its checkpoint at `yt:///...` from the stand-in's storage through Cypress file commands (`list`,
`read_file`), where a query's Spark writes it; every form of `consumer seek` ten times in a row is
`test_cli_through_proxies`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opsd.stores.history.table import history_path
from streaming_core.cluster import Cluster
from streaming_core.tuning import default_tuning_path, read_tuning
from tests.support.checkpoint import write_checkpoint
from tests.support.cli import Run
from tests.support.sink import ordered_rows
from tests.support.standin import STANDIN_TOKEN
from tests.support.wait import seen_by_every_proxy
from ytsaurus_standin import StandinProxy

#: Heals in a row.
ROUNDS = 10


@pytest.fixture(autouse=True)
def token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YT_TOKEN", STANDIN_TOKEN)


@pytest.fixture
def uri(standin: StandinProxy) -> str:
    """`opsd --cluster` (the `opsd` fixture's) is the stand-in."""
    return standin.uri


@pytest.fixture
def yt(standin_cluster: Cluster) -> Cluster:
    """The cluster of `yt_root` (a fresh directory per test) and of the checks: the stand-in."""
    return standin_cluster


@pytest.fixture
def cluster(standin_cluster: Cluster) -> Cluster:
    return standin_cluster


def ok(result: tuple[int, str, str]) -> str:
    code, out, err = result
    assert code == 0, err
    return out


def test_queue_consumer_and_table_are_made_filled_and_registered(opsd: Run, cluster: Cluster, yt_root: str) -> None:
    queue, consumer = f"{yt_root}/queue", f"{yt_root}/consumer"

    ok(opsd("queue", "create", queue, "--partitions", "2", "--schema", "data:string,n:int64"))
    ok(opsd("consumer", "create", consumer))
    ok(opsd("consumer", "register", queue, consumer, "--vital"))
    ok(opsd("queue", "produce", queue, "--partition", "1",
            stdin="".join(json.dumps({"data": f"s{i}", "n": i}) + "\n" for i in range(5))))
    ok(opsd("queue", "produce", queue, "--count", "40"))
    ok(opsd("table", "create", f"{yt_root}/sorted", "--schema", "key:int64,value:string", "--sorted-by", "key"))
    ok(opsd("table", "create", f"{yt_root}/ordered", "--schema", "data:string", "--tablets", "3"))
    ok(opsd("table", "create", f"{yt_root}/static", "--schema", "t:timestamp", "--static"))

    assert [i.total_row_count for i in cluster.get_tablet_infos(queue)] == [20, 25]
    assert [r["data"] for r in ordered_rows(cluster, queue)[20:25]] == [f"s{i}" for i in range(5)]
    assert cluster.get_consumer_offsets(consumer, queue) == {}
    seen_by_every_proxy(cluster, queue)  # each proxy lists a fresh registration after its own cache's refresh
    [registration] = cluster.list_queue_consumer_registrations(queue_path=queue)
    assert (registration.consumer_path, registration.vital) == (consumer, True)
    assert [(c["name"], c.get("sort_order")) for c in cluster.get(f"{yt_root}/sorted/@schema")] == [
        ("key", "ascending"), ("value", None)]
    assert cluster.get(f"{yt_root}/ordered/@tablet_count") == 3
    assert cluster.get(f"{yt_root}/static/@dynamic") is False


@pytest.fixture
def job(opsd: Run, cluster: Cluster, yt_root: str) -> tuple[str, str]:
    """A queue of two partitions of 100 rows each and its registered consumer, made with the CLI."""
    queue, consumer = f"{yt_root}/queue", f"{yt_root}/consumer"
    ok(opsd("queue", "create", queue, "--partitions", "2", "--schema", "data:string,n:int64"))
    ok(opsd("consumer", "create", consumer))
    ok(opsd("consumer", "register", queue, consumer))
    ok(opsd("queue", "produce", queue, "--count", "200"))
    return queue, consumer


def test_queue_trim_and_seek_to_the_trim(opsd: Run, cluster: Cluster, job: tuple[str, str]) -> None:
    """`--to-consumer` right after the registration: the trim waits until the proxy's cache lists it."""
    queue, consumer = job
    ok(opsd("consumer", "seek", queue, consumer, "--offset", "30"))

    ok(opsd("queue", "trim", queue, "--partition", "0", "--count", "10"))
    ok(opsd("queue", "trim", queue, "--to-consumer", consumer))
    ok(opsd("consumer", "seek", queue, consumer, "--offset", "40", "--partition", "1"))
    ok(opsd("queue", "trim", queue, "--partition", "1", "--count", "35"))
    ok(opsd("consumer", "seek", queue, consumer, "--to", "trim", "--past-checkpoint"))

    assert [i.trimmed_row_count for i in cluster.get_tablet_infos(queue)] == [30, 35]
    assert cluster.get_consumer_offsets(consumer, queue) == {0: 30, 1: 35}


def test_queue_reshard_adds_partitions_that_keep_every_row(opsd: Run, cluster: Cluster,
                                                           job: tuple[str, str]) -> None:
    queue, _ = job

    ok(opsd("queue", "reshard", queue, "--tablets", "4"))
    ok(opsd("queue", "produce", queue, "--partition", "3", "--count", "7"))

    assert [i.total_row_count for i in cluster.get_tablet_infos(queue)] == [100, 100, 0, 7]
    assert cluster.get(f"{queue}/@tablet_state") == "mounted"


def test_queue_trim_then_reshard_to_fewer_partitions_at_once_waits_for_ytsaurus_to_detach_the_trimmed_chunks(
        opsd: Run, cluster: Cluster, job: tuple[str, str]) -> None:
    """YTsaurus refuses to reshard away a tablet whose trimmed rows' chunks are still attached ("Some chunks of tablet
    ... are not fully trimmed", `tablet.cpp`): right after the trim they are, and the reshard waits them out."""
    queue, _ = job

    ok(opsd("queue", "trim", queue, "--partition", "1", "--count", "100"))
    ok(opsd("queue", "reshard", queue, "--tablets", "1"))

    assert [i.total_row_count for i in cluster.get_tablet_infos(queue)] == [100]
    assert cluster.get(f"{queue}/@tablet_state") == "mounted"


def write_config(path: Path, uri: str, queue: str, consumer: str, checkpoint: str) -> Path:
    path.write_text(json.dumps({"cluster": uri, "pipelines": [
        {"name": "copy", "source": {"path": queue, "options": {"consumer_path": consumer}},
         "sink": {"format": "yt", "path": f"{queue}_out"}, "checkpoint_location": checkpoint}]}))
    return path


def test_tuning_set_writes_the_document_the_source_reads(opsd: Run, cluster: Cluster, job: tuple[str, str], uri: str,
                                                          tmp_path: Path) -> None:
    queue, consumer = job
    config = write_config(tmp_path / "opsd.yaml", uri, queue, consumer, "yt:///home/nowhere")

    for i in range(1, 4):
        ok(opsd("tuning", "set", "copy", "--config", str(config), "--max-rows-per-partition", str(100 * i),
                "--max-bytes-per-partition", f"{i}MiB"))
        tuning = read_tuning(cluster, default_tuning_path(consumer))
        assert (tuning.max_rows_per_partition, tuning.max_bytes_per_partition) == (100 * i, i << 20)


def test_desync_heal_reads_a_yt_checkpoint_from_the_cluster_and_heals_ten_times_in_a_row(
        opsd: Run, cluster: Cluster, standin: StandinProxy, job: tuple[str, str], uri: str, tmp_path: Path) -> None:
    """Each round the stopped query has committed one more batch of 10 rows per partition (its checkpoint written
    where Spark writes a `yt:///` checkpoint on this cluster: the stand-in's storage); each heal moves the consumer to
    the batch's end and is recorded in the query's decision history on the cluster."""
    queue, consumer = job
    location = f"{queue}_checkpoint"
    config = write_config(tmp_path / "opsd.yaml", uri, queue, consumer, f"yt:/{location}")
    batches: dict[int, dict[int, int]] = {}
    for batch in range(ROUNDS):
        batches[batch] = {0: 10 * batch + 9, 1: 10 * batch + 9}
        write_checkpoint(standin.root / location[2:], queue, batches, batch, consumer=consumer, cluster="local")
        before = 10 * batch

        out = ok(opsd("desync", "heal", "copy", "--config", str(config), "--stopped"))

        moved = 10 * (batch + 1)
        assert f"moved partition 0 {before} -> {moved}, partition 1 {before} -> {moved}" in out
        assert cluster.get_consumer_offsets(consumer, queue) == {0: moved, 1: moved}
    assert cluster.exists(history_path(None, default_tuning_path(consumer)))
    out = ok(opsd("history", "copy", "--config", str(config), "--json"))
    assert [e["after"] for e in json.loads(out)] == [{"0": 10 * r, "1": 10 * r} for r in range(ROUNDS, 0, -1)]
    served = {s.command for s in standin.served}
    assert {"read_file", "advance_consumer"} <= served
