"""The sequence numbers of a `push_queue_producer`'s rows, checked as YTsaurus checks them (both backends).

YTsaurus: `yt/yt/client/queue_client/helpers.cpp` `ValidatePushQueueProducerRows`: a row's number is its
`$sequence_number`, or the push's initial sequence number plus the row's position, never both; numbers are
non-negative and strictly increasing; rows at or below the session's number are skipped (a prefix, therefore).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from .errors import SequenceNumberError
from .schema import SEQUENCE_NUMBER


def sequence_numbers(rows: pa.Table | Sequence[Mapping[str, Any]], initial: int | None,
                     queue_path: str) -> np.ndarray:
    """Each row's sequence number (int64), or `SequenceNumberError` naming the queue."""
    arrow = isinstance(rows, pa.Table)
    count = rows.num_rows if arrow else len(rows)
    explicit = SEQUENCE_NUMBER in rows.column_names if arrow else any(SEQUENCE_NUMBER in r for r in rows)
    if explicit and initial is not None:
        raise SequenceNumberError(f"{queue_path}: only one of explicit {SEQUENCE_NUMBER} or initial sequence "
                                  f"number can be set")
    if explicit:
        column = rows.column(SEQUENCE_NUMBER).combine_chunks() if arrow else \
            pa.array([r.get(SEQUENCE_NUMBER) for r in rows])
        if column.null_count or not pa.types.is_integer(column.type):
            raise SequenceNumberError(f"{queue_path}: every row needs an integer {SEQUENCE_NUMBER} when one has it")
        numbers = column.to_numpy(zero_copy_only=False).astype(np.int64)
    elif initial is None:
        if count:
            raise SequenceNumberError(f"{queue_path}: there is no {SEQUENCE_NUMBER} in the rows and no initial "
                                      f"sequence number was given")
        numbers = np.zeros(0, np.int64)
    else:
        numbers = np.arange(initial, initial + count, dtype=np.int64)
    if count and numbers[0] < 0:
        raise SequenceNumberError(f"{queue_path}: sequence number {int(numbers[0])} cannot be negative")
    if count > 1 and not (numbers[1:] > numbers[:-1]).all():
        raise SequenceNumberError(f"{queue_path}: sequence numbers are not strictly increasing")
    return numbers


def skipped_rows(numbers: np.ndarray, stored: int) -> int:
    """How many leading rows were written before: their numbers are at or below the session's `stored` one."""
    return int(np.searchsorted(numbers, stored, side="right"))
