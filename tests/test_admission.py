"""Byte admission without Spark: where a partition's batch ends under `max_bytes_per_partition`, exactly by
`$cumulative_data_weight` and estimated from sampled row sizes, over plain probe functions and the embedded
cluster."""

from __future__ import annotations

import itertools
import random

import pytest

from streaming_core.admission import PROBES, byte_capped_end, end_by_cumulative, end_by_sample
from tests.support.cluster import make_queue


def probes(weights: list[int], trimmed: int = 0):
    """`cumulative` and `weights` probes over rows of the given weights, rows below `trimmed` gone; and the calls."""
    cdw = list(itertools.accumulate(weights))
    calls: list[int] = []

    def cumulative(rows):
        calls.append(len(rows))
        return {r: cdw[r] for r in rows if trimmed <= r < len(cdw)}

    def single(rows):
        return {r: weights[r] for r in rows if trimmed <= r < len(weights)}

    return cumulative, single, calls


def exact_end(weights: list[int], last: int, end: int, max_bytes: int) -> int:
    """The reference: the last row of `(last, end]` whose rows from `last + 1` weigh at most `max_bytes` (`end` when
    there is no row to read)."""
    if end <= last:
        return end
    total, found = 0, last + 1
    for row in range(last + 1, end + 1):
        total += weights[row]
        if total > max_bytes:
            break
        found = row
    return found


def step(narrow: int, wide: int) -> list[int]:
    """Row weights that grow 10x mid-stream."""
    return [100] * narrow + [1000] * wide


class TestByCumulativeDataWeight:
    @pytest.mark.parametrize(("last", "end", "max_bytes"), [
        (-1, 1999, 50_000), (99, 3999, 1_000_000), (999, 1499, 20_000), (1000, 1001, 1), (500, 3999, 10**9),
        (1999, 2999, 999), (10, 10, 100)])
    def test_the_end_is_the_last_row_within_the_cap_and_at_least_one_row(self, last, end, max_bytes):
        weights = step(2000, 2000)
        cumulative, single, calls = probes(weights)
        assert end_by_cumulative(cumulative, single, last, end, max_bytes) == exact_end(weights, last, end, max_bytes)
        assert len(calls) <= 4 and max(calls, default=0) <= PROBES + 3  # a few calls of a few rows, whatever the range

    def test_random_widths_and_a_trimmed_last_row_give_the_exact_end(self):
        rng = random.Random(7)
        for _ in range(300):
            weights = [rng.choice((10, 100, 1000, 10_000)) for _ in range(rng.randint(2, 3000))]
            last = rng.randint(0, len(weights) - 2)
            end = rng.randint(last + 1, len(weights) - 1)
            max_bytes = rng.randint(1, 300_000)
            expected = exact_end(weights, last, end, max_bytes)
            for trimmed in (0, last + 1):  # the last row read still there, or trimmed (its cdw then unknown)
                cumulative, single, _ = probes(weights, trimmed)
                assert end_by_cumulative(cumulative, single, last, end, max_bytes) == expected


class TestBySample:
    @pytest.mark.parametrize(("narrow", "last", "end"), [(2000, -1, 3999), (100, 49, 3999), (3000, 2990, 3999),
                                                         (0, 10, 300)])
    def test_a_width_step_never_passes_the_cap(self, narrow, last, end):
        weights = step(narrow, 4000 - narrow)
        for max_bytes in (50, 999, 1000, 20_000, 150_000, 10**7):
            _, single, _ = probes(weights)
            found = end_by_sample(single, last, end, max_bytes)
            assert last + 1 <= found <= end
            assert found == last + 1 or sum(weights[last + 1:found + 1]) <= max_bytes

    def test_rows_of_one_width_are_admitted_up_to_the_cap(self):
        _, single, _ = probes([100] * 1000)
        assert end_by_sample(single, 99, 999, 10_000) == 199


class TestOnTheEmbeddedCluster:
    @pytest.mark.parametrize("cumulative", [True, False])
    def test_the_end_is_exact_with_the_column_and_within_one_sampled_stretch_below_it_without(self, yt, yt_root,
                                                                                              cumulative):
        schema = [{"name": "data", "type": "string"}]
        if cumulative:
            schema.append({"name": "$cumulative_data_weight", "type": "int64"})
        q = f"{yt_root}/queue"
        make_queue(yt, q, partitions=1, schema=schema)
        yt.insert_rows(q, [{"data": "x" * 91} for _ in range(300)] + [{"data": "y" * 991} for _ in range(300)])
        yt.trim_rows(q, 0, 200)
        per_row = 92 + (8 if cumulative else 0)  # 1 + the payload (+ 8: the column itself)
        # 100 narrow rows left from row 200, then wide ones (10x): 100 x per_row + 3 wide rows fit in 100 x per_row +
        # 3 x (per_row + 900)
        cap = 100 * per_row + 3 * (per_row + 900)
        found = byte_capped_end(yt, q, 0, 199, 599, cap, cumulative)
        stretch = 0 if cumulative else -(-(599 - 200) // (PROBES - 1))  # sampled rows are this far apart
        assert 302 - stretch <= found <= 302
        assert byte_capped_end(yt, q, 0, 199, 250, cap, cumulative) == 250  # the row cap binds first
