"""The search for `dyn_batch_size`: rows per insert call judged by the insert seconds per row measured at each size
tried, not by a model of the proxy. Pure: samples in, the next size out.

A batch whose calls were full gives one sample: its sink's insert seconds over its rows (`WriteStats`), at the size
in force. The cost of a size is the median of its newest `SAMPLES_PER_SIZE` samples (a slow call or a busy machine
does not decide alone), over the samples of the last `MEMORY_BATCHES` batches (a proxy's best size drifts; older
evidence is searched again). From the size of least cost (`best`), a bounded search:
1. nothing tried above it (and it is under the upper bound): try `step_up` x larger;
2. a costlier size tried above it, more than `tolerance` larger: try halfway between (bisection);
3. the same below it (`step_up` x smaller when nothing was tried below);
4. else it is settled: stay at (or go back to) the best size.
Larger first: fewer calls cost less per row until a proxy punishes oversized calls (or a row limit fails them),
and a costlier size above bounds the search from then on. Every step is within the bounds; each halving of a gap
the search brackets takes one batch, so from any start it settles in about log2(gap / tolerance) batches after
the bracket is found.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

#: The newest samples of a size whose median is its cost.
SAMPLES_PER_SIZE = 3
#: Samples older than this many batches (before the newest) are forgotten: the search starts again from there.
MEMORY_BATCHES = 50


@dataclass(frozen=True)
class CallSample:
    """One batch's insert seconds per row, made with `size` rows per call."""

    batch_id: int
    size: int
    seconds_per_row: float


class Step(StrEnum):
    """What the search does next."""

    LARGER = "larger"
    BETWEEN = "between"
    SMALLER = "smaller"
    SETTLED = "settled"


def kept(samples: Iterable[CallSample], newest: int) -> tuple[CallSample, ...]:
    """The samples still remembered once batch `newest` is measured (a batch id above it: a new checkpoint)."""
    recent = [s for s in samples if newest - MEMORY_BATCHES < s.batch_id <= newest]
    by_size: dict[int, list[CallSample]] = {}
    for s in sorted(recent, key=lambda s: s.batch_id):
        by_size.setdefault(s.size, []).append(s)
    return tuple(sorted((s for group in by_size.values() for s in group[-SAMPLES_PER_SIZE:]),
                        key=lambda s: s.batch_id))


def costs(samples: Iterable[CallSample]) -> dict[int, float]:
    """Each size's cost: the median seconds per row of its samples."""
    by_size: dict[int, list[float]] = {}
    for s in samples:
        by_size.setdefault(s.size, []).append(s.seconds_per_row)
    return {size: statistics.median(values) for size, values in by_size.items()}


def next_size(cost: Mapping[int, float], low: int, high: int, step_up: float,
              tolerance: float) -> tuple[int, Step]:
    """The size to use next and why (see the module docstring); `cost` must hold at least one size."""
    best = min(cost, key=lambda size: (cost[size], -size))
    above = min((s for s in cost if s > best), default=None)
    below = max((s for s in cost if s < best), default=None)
    if above is None and best < high:
        return min(high, round(best * step_up)), Step.LARGER
    if above is not None and above > best * (1 + tolerance):
        return (best + above) // 2, Step.BETWEEN
    if below is None and best > low:
        return max(low, round(best / step_up)), Step.SMALLER
    if below is not None and best > below * (1 + tolerance):
        return (best + below) // 2, Step.BETWEEN
    return best, Step.SETTLED
