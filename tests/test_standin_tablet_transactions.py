"""YTsaurus' tablet transaction rules as the stand-in serves them (`YTSAURUS-FACTS.md`, Transactions), and the backend
code that meets each: the consumer move retries a conflict, the heal reports one, the sink's size check holds per
tablet. Through the balancer, three proxies behind it."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import structlog
import yt.wrapper as yt

from opsd.checks.desync.apply import apply
from opsd.checks.desync.decide import HealDecision, HealOutcome
from streaming_core.cluster import Cluster, ClusterError, ConflictError
from streaming_core.cluster.base import MAX_ROWS_PER_TABLET_TRANSACTION, ORDERED
from streaming_core.cluster.ytsaurus import YtsaurusCluster
from streaming_core.cluster.ytsaurus.client import client_config
from streaming_core.consumer import advance_consumer
from streaming_core.options import SinkOptions
from streaming_core.sink import SinkPlan, commit_batch, commit_key, commit_log_path
from tests.support.cluster import make_queue
from tests.support.standin import STANDIN_TOKEN
from ytsaurus_standin import StandinProxy

CONSUMER_OFFSET_CONFLICT, TRANSACTION_LOCK_CONFLICT, TOO_MANY_ROWS_IN_TRANSACTION = 3100, 1700, 1717


@pytest.fixture
def queue(standin_cluster: Cluster) -> Iterator[tuple[str, str]]:
    """A 2-partition queue of 20 rows per partition and its registered consumer, at 0."""
    root = f"//tmp/tx{uuid.uuid4().hex[:12]}"
    make_queue(standin_cluster, f"{root}/queue", consumer=f"{root}/consumer")
    for tablet in (0, 1):
        standin_cluster.insert_rows(f"{root}/queue", [{"data": "x", "n": i} for i in range(20)], tablet_index=tablet)
    yield f"{root}/queue", f"{root}/consumer"


@pytest.fixture
def proxy_client(standin: StandinProxy) -> yt.YtClient:
    """A raw client of one proxy (where its tablet transactions live)."""
    return yt.YtClient(config=client_config(standin.proxies[0], STANDIN_TOKEN,
                                            {"proxy": {"enable_proxy_discovery": False}}))


def raced(cluster: Cluster, monkeypatch: pytest.MonkeyPatch, consumer: str, queue: str, times: int) -> list[int]:
    """Make the next `times` tablet transactions of `cluster` lose a race: just before each commits, another
    transaction writes the same consumer rows (their offsets unchanged) and commits first. Returns the count of races
    run so far (one list item each)."""
    real: Callable[[], Any] = cluster.transaction
    races: list[int] = []

    def transaction() -> Any:
        tx = real()
        if len(races) < times:
            commit = tx.commit

            def commit_after_a_concurrent_writer() -> None:
                offsets = cluster.get_consumer_offsets(consumer, queue)
                with real() as other:
                    for p in (0, 1):
                        other.advance_consumer(consumer, queue, p, offsets.get(p, 0), offsets.get(p, 0))
                races.append(1)
                commit()

            tx.commit = commit_after_a_concurrent_writer
        return tx

    monkeypatch.setattr(cluster, "transaction", transaction)
    return races


class TestCompareAndSetAtTheCall:
    def test_compare_and_set_of_a_consumer_offset_runs_at_the_call_against_the_start_snapshot(
            self, proxy_client: yt.YtClient, standin_cluster: Cluster, queue: tuple[str, str]) -> None:
        q, c = queue
        tx = proxy_client.start_transaction(type="tablet", sticky=True)
        standin_cluster.advance_consumer(c, q, 0, 0, 5)  # committed after the transaction started

        with proxy_client.Transaction(transaction_id=tx), pytest.raises(yt.YtResponseError) as stale:
            proxy_client.advance_consumer(c, q, 0, 5, 6)  # the latest commit's offset, not the snapshot's
        with proxy_client.Transaction(transaction_id=tx):
            proxy_client.advance_consumer(c, q, 0, 0, 7)  # the snapshot's offset: accepted at the call

        assert stale.value.contains_code(CONSUMER_OFFSET_CONFLICT)
        assert "Offset conflict at partition 0" in str(stale.value) and "expected offset 5, found offset 0" in str(
            stale.value)
        with pytest.raises(yt.YtResponseError) as at_commit:
            proxy_client.commit_transaction(tx)
        assert at_commit.value.contains_code(TRANSACTION_LOCK_CONFLICT)
        assert standin_cluster.get_consumer_offsets(c, q)[0] == 5

    def test_a_stale_old_offset_outside_a_transaction_gets_3100_as_a_conflict(
            self, standin_cluster: Cluster, queue: tuple[str, str]) -> None:
        q, c = queue
        standin_cluster.advance_consumer(c, q, 1, None, 4)

        with pytest.raises(ConflictError, match="expected offset 3, found offset 4"):
            standin_cluster.advance_consumer(c, q, 1, 3, 9)


class TestRowLockConflictAtCommit:
    def test_a_concurrent_writer_of_the_same_consumer_row_that_commits_first_gives_1700_at_commit(
            self, standin_cluster: Cluster, queue: tuple[str, str]) -> None:
        q, c = queue
        first, second = standin_cluster.transaction(), standin_cluster.transaction()
        first.advance_consumer(c, q, 0, 0, 3)
        second.advance_consumer(c, q, 0, 0, 8)  # the same snapshot: no conflict at the call
        first.commit()

        with pytest.raises(ConflictError, match=f"Row lock conflict due to concurrent write.*code "
                                                f"{TRANSACTION_LOCK_CONFLICT}"):
            second.commit()
        assert standin_cluster.get_consumer_offsets(c, q)[0] == 3

    def test_writers_of_other_rows_do_not_conflict(self, standin_cluster: Cluster, queue: tuple[str, str]) -> None:
        q, c = queue
        first, second = standin_cluster.transaction(), standin_cluster.transaction()
        first.advance_consumer(c, q, 0, 0, 3)
        second.advance_consumer(c, q, 1, 0, 8)
        first.commit()
        second.commit()

        assert standin_cluster.get_consumer_offsets(c, q) == {0: 3, 1: 8}

    def test_the_consumer_advance_retries_a_1700_and_moves(
            self, standin_cluster: Cluster, queue: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
        q, c = queue
        races = raced(standin_cluster, monkeypatch, c, q, times=1)

        with structlog.testing.capture_logs() as logs:
            moves = advance_consumer(standin_cluster, c, q, {0: 10, 1: 12})

        assert len(races) == 1 and moves == {0: (0, 10), 1: (0, 12)}
        assert [e["attempt"] for e in logs if e["event"] == "consumer_advance_conflict"] == [1]
        assert standin_cluster.get_consumer_offsets(c, q) == {0: 10, 1: 12}

    def test_the_heals_conflict_outcome_with_1700(
            self, standin_cluster: Cluster, queue: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
        q, c = queue
        races = raced(standin_cluster, monkeypatch, c, q, times=100)
        decision = HealDecision("job", q, c, HealOutcome.HEALED, committed_batch=1, target={0: 10, 1: 10})

        with structlog.testing.capture_logs() as logs:
            result = apply(standin_cluster, decision)

        assert result.outcome is HealOutcome.CONFLICT and not result.moves and len(races) == 3
        assert [e["event"] for e in logs if e["event"].startswith("desync_heal")] == ["desync_heal_conflict"]
        assert standin_cluster.get_consumer_offsets(c, q) == {0: 0, 1: 0}


class TestRowsPerTablet:
    def test_at_most_100000_rows_per_tablet_per_transaction_gives_1717_at_commit_per_tablet(
            self, standin_cluster: Cluster) -> None:
        root = f"//tmp/rows{uuid.uuid4().hex[:12]}"
        schema = [{"name": "k", "type": "int64", "sort_order": "ascending"}, {"name": "v", "type": "int64"}]
        standin_cluster.create("table", f"{root}/sorted", recursive=True, attributes={"dynamic": True,
                                                                                    "schema": schema})
        make_queue(standin_cluster, f"{root}/queue", schema=[{"name": "v", "type": "int64"}])
        over = [{"k": i, "v": i} for i in range(MAX_ROWS_PER_TABLET_TRANSACTION + 1)]
        half = [{"v": i} for i in range(MAX_ROWS_PER_TABLET_TRANSACTION // 2 + 1)]

        too_many = f"Transaction affects too many rows.*code {TOO_MANY_ROWS_IN_TRANSACTION}"
        with pytest.raises(ClusterError, match=too_many), standin_cluster.transaction() as tx:
            tx.insert_rows(f"{root}/sorted", over[:MAX_ROWS_PER_TABLET_TRANSACTION])
            tx.insert_rows(f"{root}/sorted", over[-2:])  # key 99999 again and one new: one row over
        with standin_cluster.transaction() as tx:  # over the limit per transaction, within it per tablet
            tx.insert_rows(f"{root}/queue", half, tablet_index=0)
            tx.insert_rows(f"{root}/queue", half, tablet_index=1)

        assert standin_cluster.select_rows(f"{root}/sorted") == []
        assert [t.total_row_count for t in standin_cluster.get_tablet_infos(f"{root}/queue")] == [len(half)] * 2


class TestReadsInsideATabletTransaction:
    """`yt/yt/ytlib/api/native/transaction.cpp`: a tablet transaction's `LookupRows` and `SelectRows` read at its
    start timestamp (`options.Timestamp = GetReadTimestamp()`), not the latest commit."""

    def test_lookup_and_select_inside_a_tablet_transaction_see_its_start_timestamp(
            self, proxy_client: yt.YtClient, standin_cluster: Cluster, queue: tuple[str, str]) -> None:
        q, _ = queue
        table = f"{q}_sorted"
        standin_cluster.create("table", table, attributes={"dynamic": True, "schema": [
            {"name": "k", "type": "int64", "sort_order": "ascending"}, {"name": "v", "type": "string"}]})
        standin_cluster.insert_rows(table, [{"k": 1, "v": "old"}, {"k": 3, "v": "gone later"}])
        tx = proxy_client.start_transaction(type="tablet", sticky=True)
        # committed by others after the transaction started
        standin_cluster.insert_rows(table, [{"k": 1, "v": "new"}, {"k": 2, "v": "added"}])
        standin_cluster.delete_rows(table, [{"k": 3}])
        standin_cluster.insert_rows(q, [{"data": "late", "n": 99}], tablet_index=0)

        with proxy_client.Transaction(transaction_id=tx):
            looked_up = list(proxy_client.lookup_rows(table, [{"k": 1}, {"k": 2}, {"k": 3}]))
            selected = list(proxy_client.select_rows(f"* FROM [{table}]"))
            queue_rows = list(proxy_client.select_rows(f"* FROM [{q}] WHERE [$tablet_index] = 0"))
        proxy_client.abort_transaction(tx)

        assert looked_up == selected == [{"k": 1, "v": "old"}, {"k": 3, "v": "gone later"}]
        assert [r["n"] for r in queue_rows] == list(range(20))
        assert standin_cluster.lookup_rows(table, [{"k": 1}, {"k": 2}, {"k": 3}]) == [
            {"k": 1, "v": "new"}, {"k": 2, "v": "added"}]
        assert len(standin_cluster.select_rows(table)) == 2

    def test_the_exactly_once_commit_of_a_batch_another_attempt_committed_meanwhile_is_a_replay(
            self, standin: StandinProxy, standin_cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
        """The sink's commit looks its marker up inside its transaction, at the start snapshot: a concurrent attempt
        of the same batch that commits first is not seen there, and shows as 1700 at commit; the batch is then
        committed once, and this attempt is a replay that wrote nothing."""
        target = f"//tmp/eo{uuid.uuid4().hex[:12]}/target"
        make_queue(standin_cluster, target)
        monkeypatch.setenv("YT_TOKEN", STANDIN_TOKEN)
        options = SinkOptions.parse({"path": target, "cluster": standin.uri, "transactional": "true",
                                     "queryname": "eo"}, {})
        plan = SinkPlan(options, standin_cluster.get_schema(target), ORDERED, staging_root=f"{target}_staging")
        real = YtsaurusCluster.transaction
        raced: list[bool] = []

        def transaction_overtaken_by_another_attempt(self: YtsaurusCluster) -> Any:
            tx = real(self)
            if not raced:  # the other attempt, started and committed after this one
                raced.append(False)
                raced[0] = commit_batch(plan, [], 7)
            return tx

        monkeypatch.setattr(YtsaurusCluster, "transaction", transaction_overtaken_by_another_attempt)
        with structlog.testing.capture_logs() as logs:
            done = commit_batch(plan, [], 7)

        assert raced == [True] and done is False
        assert [e["event"] for e in logs if e["event"].startswith("sink_batch")] == ["sink_batch_committed_meanwhile"]
        assert standin_cluster.lookup_rows(commit_log_path(options), [commit_key(options, 7)])[0]["rows"] == 0
