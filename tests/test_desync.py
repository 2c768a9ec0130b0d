"""The desync check, step by step: states from facts (evaluate), heal or not (decide), and on the embedded cluster
with hand-made checkpoints in this connector's and SPYT's layout (collect, apply)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from opsd.checks.desync.apply import apply
from opsd.checks.desync.decide import HealDecision, decide
from opsd.checks.desync.evaluate import DesyncState, evaluate, partition_state
from opsd.collect.positions import QueryTarget, collect_checkpoint
from opsd.results.desync import HealOutcome
from opsd.results.positions import PartitionPositions, QueuePositions
from streaming_core.checkpoint import newest_batch, read_checkpoint
from streaming_core.cluster import BeyondQueueEndError
from streaming_core.consumer import advance_consumer, seek_consumer
from tests.support.checkpoint import write_checkpoint
from tests.support.cluster import QUEUE_SCHEMA, make_queue


def part(consumer: int, *, checkpoint: int = 20, previous: int | None = 10, rows: int = 20, trimmed: int = 0,
         planned: int | None = None) -> PartitionPositions:
    return PartitionPositions(0, checkpoint, previous, planned, consumer, rows, trimmed)


def queue(*partitions: PartitionPositions, planned_batch: int | None = None, stopped: bool = False,
          committed_batch: int | None = 1, problem: str | None = None) -> QueuePositions:
    return QueuePositions("q", "//q", "//c", "cp", committed_batch, planned_batch, partitions, stopped, problem)


@pytest.mark.parametrize(("facts", "state"), [
    (part(20), DesyncState.IN_SYNC),
    (part(10), DesyncState.LAGGING_ONE_BATCH),
    (part(0, previous=None), DesyncState.LAGGING_ONE_BATCH),
    (part(9), DesyncState.STUCK),
    (part(21, rows=30), DesyncState.CONSUMER_AHEAD),
    (part(20, rows=30, trimmed=21), DesyncState.BEHIND_TRIM),
])
def test_each_state_follows_from_checkpoint_consumer_and_queue(facts: PartitionPositions, state: DesyncState) -> None:
    assert partition_state(facts) == state


def test_a_queue_takes_its_worst_partitions_state_and_difference_is_per_partition() -> None:
    desync = evaluate(queue(part(20), PartitionPositions(1, 50, 40, None, 40, 50, 0)))

    assert desync.state == DesyncState.LAGGING_ONE_BATCH
    assert [p.difference_rows for p in desync.partitions] == [0, 10]


def test_a_lagging_idle_query_is_healed_to_the_committed_end() -> None:
    decision = decide(evaluate(queue(part(10), PartitionPositions(1, 7, 7, None, 7, 7, 0))))

    assert decision.heal and decision.target == {0: 20}


@pytest.mark.parametrize(("facts", "outcome"), [
    (queue(part(10, planned=25, rows=30), planned_batch=2), HealOutcome.BATCH_RUNNING),
    (queue(part(10, rows=30)), HealOutcome.QUERY_BUSY),
    (queue(part(10), part(25, rows=30)), HealOutcome.CONSUMER_AHEAD),
    (queue(part(10, trimmed=21, rows=30)), HealOutcome.BEHIND_TRIM),
    (queue(committed_batch=None), HealOutcome.NO_COMMITTED_BATCH),
    (queue(problem="another cluster"), HealOutcome.MISMATCH),
    (queue(part(20)), HealOutcome.NOTHING_TO_HEAL),
])
def test_heal_refuses_each_unsafe_case(facts: QueuePositions, outcome: HealOutcome) -> None:
    decision = decide(evaluate(facts))

    assert (decision.heal, decision.outcome, dict(decision.target)) == (False, outcome, {})


def test_a_stopped_query_with_unread_rows_is_healed() -> None:
    assert decide(evaluate(queue(part(10, rows=30), stopped=True))).heal


# -- on the embedded cluster, with hand-made checkpoints --------------------------------------------------


@pytest.fixture
def setup(yt, yt_root: str, tmp_path: Path):
    """A 2-partition queue with 30 rows each, its consumer, and a checkpoint factory."""
    q, c = f"{yt_root}/queue", f"{yt_root}/consumer"
    make_queue(yt, q, consumer=c)
    yt.insert_rows(q, [{"data": "x", "n": i} for i in range(60)])

    def checkpoint(batches, committed, *, spyt: bool = False) -> str:
        location = write_checkpoint(tmp_path / "cp", q, batches, committed, consumer=None if spyt else c)
        return str(location)

    return q, c, checkpoint


def consumer_at(yt, q: str, c: str, offsets: dict[int, int]) -> None:
    for p, offset in offsets.items():
        yt.advance_consumer(c, q, p, None, offset)


@pytest.mark.parametrize("spyt", [False, True], ids=["connector", "spyt"])
@pytest.mark.parametrize(("consumer", "state"), [
    ({0: 30, 1: 30}, DesyncState.IN_SYNC),
    ({0: 20, 1: 30}, DesyncState.LAGGING_ONE_BATCH),
    ({0: 5, 1: 30}, DesyncState.STUCK),
    ({0: 30, 1: 31}, DesyncState.CONSUMER_AHEAD_OF_QUEUE),  # 31 on a partition of 30 rows
])
def test_consumers_in_every_state_are_found_in_both_layouts(yt, setup, spyt, consumer, state) -> None:
    q, c, checkpoint = setup
    location = checkpoint({0: {0: 9, 1: 9}, 1: {0: 19, 1: 19}, 2: {0: 29, 1: 29}}, committed=2, spyt=spyt)
    consumer_at(yt, q, c, consumer)
    target = QueryTarget("q", location, consumer=c if spyt else None)

    [facts] = collect_checkpoint(yt, target, read_checkpoint(location))

    assert evaluate(facts).state == state
    assert facts.partitions[0].previous_next == 20 and facts.partitions[1].row_count == 30


def test_a_checkpoint_behind_the_trim_is_found(yt, setup) -> None:
    q, c, checkpoint = setup
    location = checkpoint({0: {0: 9, 1: 9}}, committed=0)
    consumer_at(yt, q, c, {0: 10, 1: 10})
    yt.trim_rows(q, 1, 15)

    [facts] = collect_checkpoint(yt, QueryTarget("q", location), read_checkpoint(location))

    assert [p.state for p in evaluate(facts).partitions] == [DesyncState.IN_SYNC, DesyncState.BEHIND_TRIM]


def test_spyt_offsets_need_the_consumer_named(yt, setup) -> None:
    _, _, checkpoint = setup
    location = checkpoint({0: {0: 9, 1: 9}}, committed=0, spyt=True)

    [facts] = collect_checkpoint(yt, QueryTarget("q", location), read_checkpoint(location))

    assert "name no consumer_path" in facts.problem and decide(evaluate(facts)).outcome == HealOutcome.MISMATCH


def test_a_heal_advances_the_consumer_to_the_committed_end_and_logs_it(yt, setup) -> None:
    q, c, checkpoint = setup
    location = checkpoint({0: {0: 19, 1: 19}, 1: {0: 29, 1: 29}}, committed=1)
    consumer_at(yt, q, c, {0: 20, 1: 20})
    [facts] = collect_checkpoint(yt, QueryTarget("q", location), read_checkpoint(location))

    with capture_logs() as logs:
        result = apply(yt, decide(evaluate(facts)), lambda: newest_batch(location))

    assert result.outcome == HealOutcome.HEALED and result.moves == {0: (20, 30), 1: (20, 30)}
    assert yt.get_consumer_offsets(c, q) == {0: 30, 1: 30}
    assert [e["event"] for e in logs] == ["desync_healed"]


def test_a_heal_is_dropped_when_a_batch_was_planned_since_the_decision(yt, setup, tmp_path: Path) -> None:
    q, c, checkpoint = setup
    location = checkpoint({0: {0: 19, 1: 19}, 1: {0: 29, 1: 29}}, committed=1)
    consumer_at(yt, q, c, {0: 20, 1: 20})
    [facts] = collect_checkpoint(yt, QueryTarget("q", location), read_checkpoint(location))
    decision = decide(evaluate(facts))
    checkpoint({2: {0: 29, 1: 29}}, committed=None)  # the query planned batch 2 meanwhile

    result = apply(yt, decision, lambda: newest_batch(location))

    assert result.outcome == HealOutcome.BATCH_RUNNING and yt.get_consumer_offsets(c, q) == {0: 20, 1: 20}


def test_a_heal_never_moves_a_consumer_backwards(yt, setup) -> None:
    q, c, checkpoint = setup
    location = checkpoint({0: {0: 19, 1: 19}, 1: {0: 29, 1: 29}}, committed=1)
    consumer_at(yt, q, c, {0: 20, 1: 20})
    [facts] = collect_checkpoint(yt, QueryTarget("q", location), read_checkpoint(location))
    decision = decide(evaluate(facts))
    consumer_at(yt, q, c, {0: 30, 1: 30})  # the source acknowledged the batch meanwhile

    result = apply(yt, decision, lambda: newest_batch(location))

    assert result.outcome == HealOutcome.NOTHING_TO_HEAL and yt.get_consumer_offsets(c, q) == {0: 30, 1: 30}


def test_a_checkpoint_that_does_not_read_the_named_queue_is_a_problem(yt, setup) -> None:
    q, c, checkpoint = setup
    location = checkpoint({0: {0: 9, 1: 9}}, committed=0)

    [facts] = collect_checkpoint(yt, QueryTarget("q", location, queue="//other", consumer=c),
                                 read_checkpoint(location))

    assert facts.problem == f"{location}: batch 0 has no offsets for //other (it reads {q})"


# -- offsets past the queue's end (a queue recreated under the same path) ----------------------------------


@pytest.mark.parametrize(("facts", "state"), [
    (part(0, checkpoint=100, previous=50, rows=3), DesyncState.CHECKPOINT_AHEAD_OF_QUEUE),
    (part(100, checkpoint=100, previous=50, rows=3), DesyncState.CHECKPOINT_AHEAD_OF_QUEUE),
    (part(21, checkpoint=20, rows=20), DesyncState.CONSUMER_AHEAD_OF_QUEUE),
    (part(20, checkpoint=20, rows=20), DesyncState.IN_SYNC),  # at the end is not past it
    (part(10, checkpoint=20, rows=20), DesyncState.LAGGING_ONE_BATCH),
])
def test_offsets_past_the_queues_end_have_states_of_their_own(facts: PartitionPositions, state: DesyncState) -> None:
    assert partition_state(facts) == state


@pytest.mark.parametrize("facts", [
    queue(part(0, checkpoint=100, previous=50, rows=3), stopped=True),
    queue(part(10, rows=20), part(25, checkpoint=20, rows=20), stopped=True),
], ids=["checkpoint", "consumer"])
def test_offsets_past_the_queues_end_are_never_healed(facts: QueuePositions) -> None:
    decision = decide(evaluate(facts))

    assert (decision.heal, decision.outcome, dict(decision.target)) == (False, HealOutcome.AHEAD_OF_QUEUE, {})


@pytest.fixture
def recreated(yt, yt_root: str, tmp_path: Path):
    """A query read 100 rows of a 1-partition queue (batches 0, 1 committed), then the queue was removed and created
    again under the same path, with 3 rows: `(queue, consumer, checkpoint location)`."""
    q, c = f"{yt_root}/queue", f"{yt_root}/consumer"
    make_queue(yt, q, consumer=c, partitions=1)
    yt.insert_rows(q, [{"data": "x", "n": i} for i in range(100)])
    location = write_checkpoint(tmp_path / "cp", q, {0: {0: 49}, 1: {0: 99}}, committed=1, consumer=c)
    consumer_at(yt, q, c, {0: 50})
    yt.remove(q)
    yt.create("table", q, attributes={"dynamic": True, "tablet_count": 1, "schema": QUEUE_SCHEMA})
    yt.register_queue_consumer(q, c)
    yt.insert_rows(q, [{"data": "new", "n": i} for i in range(3)])
    return q, c, str(location)


def test_a_recreated_queue_is_found_as_a_checkpoint_ahead_of_it_and_the_heal_is_refused(yt, recreated) -> None:
    q, c, location = recreated
    [facts] = collect_checkpoint(yt, QueryTarget("q", location), read_checkpoint(location))
    before = yt.get_consumer_offsets(c, q)

    result = apply(yt, decide(evaluate(replace(facts, query_stopped=True))), lambda: newest_batch(location))

    assert evaluate(facts).state == DesyncState.CHECKPOINT_AHEAD_OF_QUEUE
    assert (facts.partitions[0].checkpoint_next, facts.partitions[0].row_count) == (100, 3)
    assert result.outcome == HealOutcome.AHEAD_OF_QUEUE and yt.get_consumer_offsets(c, q) == before


@pytest.mark.hostile
def test_the_apply_step_refuses_a_heal_past_the_queues_end_whatever_the_decision_says(yt, recreated) -> None:
    q, c, location = recreated
    forged = HealDecision("q", q, c, HealOutcome.HEALED, 1, {0: 100})
    before = yt.get_consumer_offsets(c, q)

    with capture_logs() as logs:
        result = apply(yt, forged, lambda: newest_batch(location))

    assert result.outcome == HealOutcome.AHEAD_OF_QUEUE and result.moves == {}
    assert yt.get_consumer_offsets(c, q) == before
    [refused] = [e for e in logs if e["event"] == "desync_heal_refused"]
    assert f"{q}: partition 0: consumer {c} not moved to offset 100: the queue has 3 rows there" in refused["error"]


@pytest.mark.hostile
def test_no_advance_moves_a_consumer_past_the_queues_end_nor_to_a_partition_it_lacks(yt, recreated) -> None:
    q, c, _ = recreated
    before = yt.get_consumer_offsets(c, q)

    with pytest.raises(BeyondQueueEndError, match=rf"{q}: partition 0: consumer {c} not moved to offset 4: the "
                                                  r"queue has 3 rows there .*nothing moved"):
        advance_consumer(yt, c, q, {0: 4})
    with pytest.raises(BeyondQueueEndError, match=r"partition 1: .* no partition 1 \(1 partitions\)"):
        seek_consumer(yt, c, q, {0: 0, 1: 0})

    assert yt.get_consumer_offsets(c, q) == before == {0: 50}  # the consumer kept its offset of the old queue
    assert seek_consumer(yt, c, q, {0: 0}) == {0: (50, 0)}  # a person moves it back
    assert advance_consumer(yt, c, q, {0: 3}) == {0: (0, 3)}  # and up to the end is fine


def test_a_consumer_past_the_queues_end_is_found_and_seeking_it_back_resolves_it(yt, setup) -> None:
    q, c, checkpoint = setup
    location = checkpoint({0: {0: 19, 1: 19}, 1: {0: 29, 1: 29}}, committed=1)
    consumer_at(yt, q, c, {0: 30, 1: 80})  # moved by hand past the 30 rows of partition 1

    [facts] = collect_checkpoint(yt, QueryTarget("q", location), read_checkpoint(location))
    moves = seek_consumer(yt, c, q, {1: 30})
    [after] = collect_checkpoint(yt, QueryTarget("q", location), read_checkpoint(location))

    assert [p.state for p in evaluate(facts).partitions] == [DesyncState.IN_SYNC, DesyncState.CONSUMER_AHEAD_OF_QUEUE]
    assert moves == {1: (80, 30)} and evaluate(after).state == DesyncState.IN_SYNC


class ReadOrder:
    """The embedded cluster, recording which reads the desync collector makes, in order."""

    def __init__(self, cluster) -> None:
        self.cluster, self.calls = cluster, []

    def __getattr__(self, name: str):
        if name in ("get_consumer_offsets", "get_tablet_infos"):
            self.calls.append(name)
        return getattr(self.cluster, name)


def test_the_consumer_is_read_before_the_queues_counters_so_a_busy_query_never_looks_past_the_end(yt, setup) -> None:
    _, _, checkpoint = setup
    location = checkpoint({0: {0: 9, 1: 9}}, committed=0)
    cluster = ReadOrder(yt)

    collect_checkpoint(cluster, QueryTarget("q", location), read_checkpoint(location))

    assert cluster.calls == ["get_consumer_offsets", "get_tablet_infos"]
