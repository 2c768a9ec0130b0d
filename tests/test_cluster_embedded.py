"""`EmbeddedCluster`: the shared contract on local disk, plus what only the embedded backend promises —
several processes at once, crash safety of transactions, picklability and the default URI."""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import multiprocessing.queues
import multiprocessing.synchronize
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from streaming_core.cluster import Cluster, ClusterError, InvalidUriError, connect, default_uri, resolve_uri
from streaming_core.cluster.embedded import EmbeddedCluster
from tests.support.cluster_contract import NUMBERED_SCHEMA, ClusterContract, data_rows, read_all, total_rows
from tests.support.producer_contract import ProducerContract


@pytest.fixture
def cluster(tmp_path: Path) -> Cluster:
    with connect(f"local://{tmp_path / 'cluster'}") as c:
        yield c


@pytest.fixture
def root() -> str:
    return "//home/test"


class TestEmbeddedContract(ClusterContract, ProducerContract):
    """The contract suite on a fresh embedded cluster per test."""


def test_move_of_anything_but_a_static_table_is_refused_by_name(cluster: Cluster, root: str) -> None:
    cluster.create("table", f"{root}/queue", recursive=True, attributes={"dynamic": True, "schema": NUMBERED_SCHEMA})
    with pytest.raises(ClusterError, match=f"{root}/queue: the embedded cluster moves static tables only, found "
                                           "ordered_dynamic"):
        cluster.move(f"{root}/queue", f"{root}/other")
    assert cluster.exists(f"{root}/queue") and not cluster.exists(f"{root}/other")


# -- several processes at once ------------------------------------------------------------------------

WRITERS = 4
INSERTS_PER_WRITER = 20
ROWS_PER_INSERT = 100
SPAWN = multiprocessing.get_context("spawn")  # what Spark's workers look like: fresh interpreters


def _append_worker(uri: str, queue: str, writer: int, go: multiprocessing.synchronize.Event) -> None:
    cluster = connect(uri)
    go.wait(30)
    for insert in range(INSERTS_PER_WRITER):
        start = writer * 100_000 + insert * ROWS_PER_INSERT
        cluster.insert_rows(queue, data_rows(ROWS_PER_INSERT, start))


def _tail_worker(uri: str, queue: str, stop: multiprocessing.synchronize.Event,
                 result: multiprocessing.queues.Queue) -> None:
    """Follow every tablet while the writers run; report rows seen, or the first gap found."""
    cluster = connect(uri)
    seen = [0] * len(cluster.get_tablet_infos(queue))
    while True:
        stopping = stop.is_set()  # read once more after the writers finished
        for info in cluster.get_tablet_infos(queue):
            t = info.tablet_index
            for batch in cluster.read_tablet(queue, t, seen[t], info.total_row_count, service_columns=True):
                indices = batch.column("$row_index").to_pylist()
                if indices != list(range(seen[t], seen[t] + len(indices))):
                    result.put(f"gap in tablet {t}: expected row {seen[t]}, got {indices[:3]}")
                    return
                seen[t] += len(indices)
        if stopping:
            result.put(sum(seen))
            return


def test_concurrent_writers_and_a_reader_see_exact_gap_free_rows(cluster: Cluster) -> None:
    queue = ClusterContract.make_queue(cluster, "//home/shared/queue", NUMBERED_SCHEMA, tablets=2)
    go, stop, result = SPAWN.Event(), SPAWN.Event(), SPAWN.Queue()
    writers = [SPAWN.Process(target=_append_worker, args=(cluster.uri, queue, w, go)) for w in range(WRITERS)]
    reader = SPAWN.Process(target=_tail_worker, args=(cluster.uri, queue, stop, result))
    for p in [*writers, reader]:
        p.start()
    go.set()
    for p in writers:
        p.join(60)
        assert p.exitcode == 0
    stop.set()
    seen = result.get(timeout=60)
    reader.join(60)

    expected = WRITERS * INSERTS_PER_WRITER * ROWS_PER_INSERT
    assert seen == expected
    assert total_rows(cluster, queue) == expected
    numbers = []
    for tablet in (0, 1):
        rows = read_all(cluster, queue, tablet, service_columns=True)
        assert [r["$row_index"] for r in rows] == list(range(len(rows)))
        for writer in range(WRITERS):  # each writer's rows keep their order inside a tablet
            own = [r["n"] for r in rows if r["n"] // 100_000 == writer]
            assert own == sorted(own)
        numbers += [r["n"] for r in rows]
    assert sorted(numbers) == sorted(r["n"] for w in range(WRITERS) for r in data_rows(
        INSERTS_PER_WRITER * ROWS_PER_INSERT, w * 100_000))


# -- crash safety -----------------------------------------------------------------------------------------


def _die_inside_transaction(uri: str, queue: str, ready: multiprocessing.connection.Connection) -> None:
    cluster = connect(uri)
    tx = cluster.transaction()
    tx.insert_rows(queue, data_rows(500, 1000))
    tx.advance_consumer("//home/crash/consumer", queue, 0, None, 50)
    ready.send("written")
    signal.pause()  # wait for SIGKILL with the transaction open


def test_process_killed_inside_a_transaction_loses_nothing_committed_and_leaves_nothing(
        cluster: Cluster) -> None:
    queue = ClusterContract.make_queue(cluster, "//home/crash/queue", NUMBERED_SCHEMA)
    cluster.create_consumer("//home/crash/consumer")
    cluster.register_queue_consumer(queue, "//home/crash/consumer")
    cluster.insert_rows(queue, data_rows(100))
    ours, theirs = SPAWN.Pipe()
    child = SPAWN.Process(target=_die_inside_transaction, args=(cluster.uri, queue, theirs))
    child.start()
    assert ours.poll(60), "the child never reported its open transaction"
    assert ours.recv() == "written"
    os.kill(child.pid, signal.SIGKILL)
    child.join(30)
    assert child.exitcode == -signal.SIGKILL

    reopened = connect(cluster.uri)
    assert [r["n"] for r in read_all(reopened, queue, 0)] == list(range(100))
    assert reopened.get_consumer_offsets("//home/crash/consumer", queue) == {}
    reopened.insert_rows(queue, data_rows(10, 100))
    reopened.advance_consumer("//home/crash/consumer", queue, 0, None, 110)
    assert [r["n"] for r in read_all(reopened, queue, 0)] == list(range(110))


# -- pickling and URIs -------------------------------------------------------------------------------------


def test_cluster_survives_pickling_after_use(cluster: Cluster) -> None:
    queue = ClusterContract.make_queue(cluster, "//home/p/queue", NUMBERED_SCHEMA)
    cluster.insert_rows(queue, data_rows(3))  # opens a connection, which must not travel
    copy = pickle.loads(pickle.dumps(cluster))
    assert copy.uri == cluster.uri
    copy.insert_rows(queue, data_rows(2, 3))
    assert [r["n"] for r in read_all(cluster, queue, 0)] == list(range(5))


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for name in ("OPSD_CLUSTER", "OPSD_CLUSTER_ROOT", "YT_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


def test_default_uri_is_the_embedded_cluster_under_the_working_directory(
        clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    expected = f"local://{tmp_path.resolve() / '.opsd' / 'cluster'}"
    assert default_uri() == expected
    assert resolve_uri(None) == resolve_uri("") == resolve_uri("local://") == expected
    cluster = connect()
    assert isinstance(cluster, EmbeddedCluster) and cluster.uri == expected


def test_opsd_cluster_root_moves_the_embedded_root(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv("OPSD_CLUSTER_ROOT", "data/root")
    expected = f"local://{tmp_path.resolve() / 'data' / 'root'}"
    assert default_uri() == resolve_uri("local://") == expected


def test_yt_proxy_selects_ytsaurus_and_opsd_cluster_wins_over_it(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("YT_PROXY", "hahn")
    assert default_uri() == "yt://hahn"
    clean_env.setenv("OPSD_CLUSTER", "local:///srv/cluster")
    assert default_uri() == "local:///srv/cluster"
    assert connect().uri == "local:///srv/cluster"


def test_local_uri_takes_an_absolute_path_after_three_slashes(clean_env: pytest.MonkeyPatch) -> None:
    assert resolve_uri("local:///abs/root") == "local:///abs/root"
    with pytest.raises(InvalidUriError, match="three slashes"):
        resolve_uri("local://relative/root")


def test_the_calls_a_query_start_makes_import_no_pandas(cluster: Cluster, root: str, tmp_path: Path) -> None:
    """Spark starts a fresh streaming source runner for every query; its first calls (tablet counters, the
    consumer's offsets, whose table has upsert and tombstone runs here) must not make pyarrow import pandas,
    which it does the first time it converts a Python value (~0.2 s, once per query)."""
    queue, consumer = f"{root}/queue", f"{root}/consumer"
    cluster.create("table", queue, recursive=True, attributes={"dynamic": True, "schema": NUMBERED_SCHEMA,
                                                                "tablet_count": 2})
    cluster.insert_rows(queue, data_rows(10), tablet_index=1)
    cluster.create_consumer(consumer)
    cluster.register_queue_consumer(queue, consumer)
    cluster.advance_consumer(consumer, queue, 1, None, 4)
    cluster.advance_consumer(consumer, queue, 1, 4, 7)
    cluster.delete_rows(consumer, [{"queue_cluster": cluster.name, "queue_path": queue, "partition_index": 0}])
    uri = f"local://{tmp_path / 'cluster'}"
    code = (
        "import sys\n"
        "from streaming_core.cluster import connect\n"
        f"cluster = connect({uri!r})\n"
        f"infos = cluster.get_tablet_infos({queue!r})\n"
        f"offsets = cluster.get_consumer_offsets({consumer!r}, {queue!r})\n"
        f"regs = cluster.list_queue_consumer_registrations({queue!r}, {consumer!r})\n"
        "print(sorted(offsets.items()), [i.total_row_count for i in infos], len(regs), 'pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()

    assert " ".join(out) == "[(1, 7)] [0, 10] 1 False"
