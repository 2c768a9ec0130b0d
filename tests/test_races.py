"""One check cycle on a cluster that changes under it as it does in normal operation (`tests.support.races`): with
the change made before each of the cycle's cluster calls in turn, no step fails, nothing is logged as failed, and each
check finds (and the heal and the tuner do) what they find on the world before the change or after it, never a
mixture of the two."""

from __future__ import annotations

from pathlib import Path

import pytest

from opsd.collect.positions import READ_ATTEMPTS, PositionsCollector, QueryTarget
from tests.support.checkpoint import write_checkpoint
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
