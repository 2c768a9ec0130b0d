"""Byte admission: where a partition's next batch ends under `max_bytes_per_partition`.

The row cap (`max_rows_per_partition`, `streaming_core.offsets.batch_end`) bounds a batch by rows; memory and
transaction limits are bytes, and rows can grow from 100 bytes to 10 KB in one queue. The byte cap bounds each
partition's batch by YTsaurus' data weight (`streaming_core.cluster.data_weight`), and the batch ends where the
first of the two caps binds. At least one row is always admitted, so a row wider than the cap is read alone
rather than stalling the query.

Where the rows' data weight comes from:
- a queue whose schema has `$cumulative_data_weight` (YTsaurus fills it on write; so does the embedded cluster):
  exact. The bytes of rows (a, b] are cdw[b] - cdw[a]; the end is found by a search over the rows the row cap
  admits, reading the column at `PROBES` rows per round (`Cluster.read_rows_at`: one call per round, a few rounds:
  each narrows the range `PROBES + 1` times). When the last row read is trimmed, its cdw is that of the next row
  less that row's own weight.
- any other queue: estimated from a sample of `PROBES` rows spread over the rows the row cap admits, read whole and
  weighed; each stretch between two sampled rows counts at the wider of the two (a width change inside a stretch
  is charged at its wide end), so the estimate errs toward smaller batches.

Pure arithmetic over what `probe` returns: the source passes the cluster's reads, tests pass plain functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa

from .cluster import Cluster
from .cluster.data_weight import row_data_weights
from .cluster.schema import CUMULATIVE_DATA_WEIGHT, ROW_INDEX

#: Rows read per probe call.
PROBES = 16

#: Row index -> a number per row (cumulative data weight, or a row's own weight); rows it cannot read are absent.
Probe = Callable[[Sequence[int]], dict[int, int]]


def _grid(low: int, high: int, count: int) -> list[int]:
    """Up to `count` row indexes spread evenly over `[low, high]`, both ends included."""
    if high - low + 1 <= count:
        return list(range(low, high + 1))
    step = (high - low) / (count - 1)
    return sorted({low + round(i * step) for i in range(count)})


def end_by_cumulative(cumulative: Probe, weights: Probe, last: int, end: int, max_bytes: int,
                      probes: int = PROBES) -> int:
    """The last row of the batch: the largest `e` in `(last, end]` whose rows `(last, e]` weigh at most `max_bytes` by
    `$cumulative_data_weight` (`cumulative`), at least `last + 1`. `weights` weighs single rows (only asked when
    the row `last` is trimmed). `last`: the last row read (-1: none); `end`: the last row the row cap admits."""
    if end <= last + 1:
        return end
    known = cumulative([last, last + 1, end, *_grid(last + 2, end - 1, probes)] if last >= 0
                       else [end, *_grid(0, end - 1, probes)])
    if last < 0:
        base = 0
    elif last in known:
        base = known[last]
    elif last + 1 in known:  # the last row read is trimmed: the next one's cumulative less its own weight
        base = known[last + 1] - weights([last + 1]).get(last + 1, 0)
    else:
        return last + 1  # the rows to read are trimmed as well: the read reports it
    budget = base + max_bytes
    if known.get(end, budget + 1) <= budget:
        return end
    low, high = last + 1, end  # the row `low` is admitted whatever it weighs; `high` is over the budget
    while high - low > 1:
        inside = sorted(r for r in known if low < r < high)
        if not inside:
            known.update(cumulative(_grid(low + 1, high - 1, probes)))
            inside = sorted(r for r in known if low < r < high)
            if not inside:  # none of them readable (trimmed meanwhile): the read reports it
                break
        for row in inside:
            if known[row] <= budget:
                low = row
            else:
                high = row
                break
    return low


def end_by_sample(weights: Probe, last: int, end: int, max_bytes: int, probes: int = PROBES) -> int:
    """The last row of the batch by a sample of row weights over `(last, end]` (see the module docstring), at least
    `last + 1`."""
    if end <= last + 1:
        return end
    sampled = weights(_grid(last + 1, end, probes))
    points = sorted(sampled)
    if not points:
        return last + 1
    previous = points[0]
    total = sampled[previous] * (previous - last)  # rows up to the first sampled one weigh as it does
    if total > max_bytes:
        return max(last + 1, last + max_bytes // max(1, sampled[previous]))
    for row in points[1:]:
        per_row = max(sampled[previous], sampled[row])
        if total + per_row * (row - previous) > max_bytes:
            return previous + (max_bytes - total) // per_row
        total += per_row * (row - previous)
        previous = row
    return previous if previous == end else min(end, previous + (max_bytes - total) // max(1, sampled[previous]))


def byte_capped_end(cluster: Cluster, path: str, partition: int, last: int, end: int, max_bytes: int,
                    has_cumulative: bool) -> int:
    """The end of one partition's batch under the byte cap, reading the queue (see the module docstring)."""

    def cumulative(rows: Sequence[int]) -> dict[int, int]:
        return _by_row(cluster.read_rows_at(path, partition, rows, columns=[CUMULATIVE_DATA_WEIGHT]),
                       lambda t: t.column(CUMULATIVE_DATA_WEIGHT).to_pylist())

    def weights(rows: Sequence[int]) -> dict[int, int]:
        return _by_row(cluster.read_rows_at(path, partition, rows), lambda t: row_data_weights(t).tolist())

    if has_cumulative:
        return end_by_cumulative(cumulative, weights, last, end, max_bytes)
    return end_by_sample(weights, last, end, max_bytes)


def _by_row(table: pa.Table, values: Callable[[pa.Table], list[int]]) -> dict[int, int]:
    return {r: v for r, v in zip(table.column(ROW_INDEX).to_pylist(), values(table), strict=True) if v is not None}
