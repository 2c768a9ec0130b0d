"""One check cycle on a cluster that changes under it as it does in normal operation (`tests.support.races`): with
the change made before each of the cycle's cluster calls in turn, no step fails, nothing is logged as failed, and each
check finds (and the heal and the tuner do) what they find on the world before the change or after it, never a
mixture of the two."""

from __future__ import annotations

from pathlib import Path

import pytest

from opsd.checks.desync.evaluate import partition_state
from opsd.collect.positions import READ_ATTEMPTS, PositionsCollector, QueryTarget
from opsd.observe.progress import BatchProgress, SourceProgress
from opsd.results.desync import DesyncState
from streaming_core.cluster import connect
from streaming_core.consumer import advance_consumer
from streaming_core.offsets import QueueOffset
from tests.support.checkpoint import offset_line, write_checkpoint
from tests.support.races import BATCHES, CHANGES, CONSUMER, QUERY, QUEUE, Calls, Change, build_world, interleave, sweep


@pytest.mark.parametrize("change", CHANGES, ids=str)
def test_a_cycle_holds_up_whichever_of_its_cluster_calls_a_normal_change_comes_before(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: Change) -> None:
    found = sweep(monkeypatch, build_world(tmp_path / "template", change.rows), change, tmp_path)

    assert not found.before.failed and not found.after.failed
    assert len(found.interleaved) == len(found.before.calls) >= 14
    assert [(n, o.calls[n - 1], o.failures, o.found) for n, o in found.inconsistent()] == []


def test_a_query_that_runs_a_batch_at_every_read_of_its_positions_gets_a_problem_not_a_mixture(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    world = build_world(tmp_path / "world")
    batch_ids = iter(range(max(BATCHES) + 1, 100))

    def commit_next_batch() -> None:
        batch_id = next(batch_ids)
        write_checkpoint(world.checkpoint, QUEUE, {batch_id: {0: 19, 1: 19}}, batch_id, consumer=CONSUMER)

    calls = Calls(commit_next_batch, before_each="get_consumer_offsets")
    interleave(monkeypatch, calls)
    [positions] = PositionsCollector(world.uri, [QueryTarget(QUERY, str(world.checkpoint), QUEUE, CONSUMER)]
                                     ).read().queues

    assert calls.names.count("get_consumer_offsets") == READ_ATTEMPTS
    assert positions.partitions == () and "planned or committed a batch each time" in positions.problem


def test_an_attached_query_whose_next_batch_completes_while_its_consumer_is_read_is_read_again_in_sync(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    world = build_world(tmp_path / "world")
    with connect(world.uri) as cluster:  # batch 2 runs: planning it acknowledged batch 1
        advance_consumer(cluster, CONSUMER, QUEUE, {0: 20, 1: 20})
    events = [batch_progress(0, None, 9), batch_progress(1, 9, 19)]

    def batch_2_completes_and_batch_3_is_planned() -> None:
        events.append(batch_progress(2, 19, 24))
        with connect(world.uri) as cluster:
            advance_consumer(cluster, CONSUMER, QUEUE, {0: 25, 1: 25})

    interleave(monkeypatch, Calls(batch_2_completes_and_batch_3_is_planned, 1))
    [positions] = PositionsCollector(world.uri, progress=lambda: {"attached": list(events)}).read().queues

    states = [partition_state(p) for p in positions.partitions]
    assert (positions.committed_batch, states) == (2, [DesyncState.IN_SYNC] * 2)  # not consumer_ahead of batch 1


def batch_progress(batch_id: int, start: int | None, end: int) -> BatchProgress:
    """A batch of the attached query that read rows `(start, end]` of both partitions."""
    def offsets(last: int | None) -> QueueOffset | None:
        return None if last is None else QueueOffset.from_progress(offset_line(QUEUE, {0: last, 1: last}, CONSUMER))

    return BatchProgress("attached", "id", "run", batch_id, 0.0,
                         sources=(SourceProgress("yt", 0, offsets(start), offsets(end)),))
