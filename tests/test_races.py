"""One check cycle on a cluster that changes under it as it does in normal operation (`tests.support.races`): with
the change made before each of the cycle's cluster calls in turn, no step fails, nothing is logged as failed, and each
check finds what it finds on the world before the change or after it, never a mixture of the two."""

from __future__ import annotations

import pytest

from tests.support.races import CHANGES, Change, build_world, sweep


@pytest.mark.parametrize("change", CHANGES, ids=str)
def test_a_cycle_holds_up_whichever_of_its_cluster_calls_a_normal_change_comes_before(
        monkeypatch: pytest.MonkeyPatch, tmp_path, change: Change) -> None:
    found = sweep(monkeypatch, build_world(tmp_path / "template"), change, tmp_path)

    assert not found.before.failed and not found.after.failed
    assert len(found.interleaved) == len(found.before.calls) >= 14
    assert [(n, o.calls[n - 1], o.failures, o.found) for n, o in found.inconsistent()] == []
