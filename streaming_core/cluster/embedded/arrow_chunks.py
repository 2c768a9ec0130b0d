"""Queue rows as Arrow chunks: slicing appends into bounded pieces, placing rows on tablets, and
regrouping what a range read finds into batches of bounded rows and bytes.

Pure functions over Arrow data, used by the embedded cluster's storage; kept apart from the SQLite code
so each can be read (and tested) alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

from ..base import ROWS
from ..errors import ClusterError, RowError
from ..schema import TABLET_INDEX

#: `rebatch` sends a part of at least this share of its row or byte limit (1 / `WHOLE_SHARE`) as it is, uncopied.
WHOLE_SHARE = 4


def int64_array(values: np.ndarray) -> pa.Array:
    """An int64 Arrow array over a numpy array's buffer.

    `pa.array` and `pa.scalar` import pandas the first time they convert anything (~0.2 s); building arrays
    from buffers converts nothing, so the reads of the streaming source runner, a process Spark starts for
    every query (tablet counters, consumer offsets), never pay that import.
    """
    data = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(data), [None, pa.py_buffer(data)])


def bool_array(values: np.ndarray) -> pa.Array:
    """A boolean Arrow array over numpy booleans (bit-packed), converting nothing (see `int64_array`)."""
    bits = np.packbits(np.asarray(values, dtype=bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])


def rebatch(pieces: Iterable[pa.RecordBatch], max_rows: int, max_bytes: int) -> Iterator[pa.RecordBatch]:
    """Regroup small batches and split big ones to at most `max_rows` rows and about `max_bytes` bytes.

    A part that already holds a `WHOLE_SHARE`-th of either limit is a batch worth sending as it is: it is yielded
    alone, not copied into a bigger one (a queue's full stored chunks, `STORED_CHUNK_ROWS`, reach the reads' row limit's
    quarter: a range read of them copies no row); smaller parts (a queue of small appends) are regrouped.
    """
    pending: list[pa.RecordBatch] = []
    rows = size = 0
    for piece in pieces:
        for part in slices(piece, max_rows, max_bytes):
            whole = part.num_rows * WHOLE_SHARE >= max_rows or part.nbytes * WHOLE_SHARE >= max_bytes
            if pending and (whole or rows + part.num_rows > max_rows or size + part.nbytes > max_bytes):
                yield _concat(pending)
                pending, rows, size = [], 0, 0
            if whole:
                yield part
                continue
            pending.append(part)
            rows += part.num_rows
            size += part.nbytes
    if pending:
        yield _concat(pending)


def _concat(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


def slices(data: pa.Table | pa.RecordBatch, max_rows: int, max_bytes: int) -> Iterator[pa.RecordBatch]:
    """Slices of at most `max_rows` rows and about `max_bytes` bytes (at least one row each)."""
    if data.num_rows == 0:
        return
    per_row = max(1, data.nbytes // data.num_rows)
    step = max(1, min(max_rows, max_bytes // per_row))
    batches = data.to_batches() if isinstance(data, pa.Table) else [data]
    for batch in batches:
        for offset in range(0, batch.num_rows, step):
            yield batch.slice(offset, step)


def tablet_targets(rows: ROWS, path: str, tablet_count: int, tablet_index: int | None) -> list[int] | None:
    """Per-row target tablets from a `$tablet_index` column or argument; None means spread evenly."""
    if tablet_index is not None:
        if not isinstance(tablet_index, int) or not 0 <= tablet_index < tablet_count:
            raise ClusterError(f"{path}: no tablet {tablet_index!r} (the table has {tablet_count} tablets)")
        return [tablet_index] * _num_rows(rows)
    if isinstance(rows, pa.Table | pa.RecordBatch):
        if TABLET_INDEX not in rows.schema.names:
            return None
        values = rows.column(TABLET_INDEX).to_pylist()
    else:
        if not rows or not any(TABLET_INDEX in r for r in rows):
            return None
        values = [r.get(TABLET_INDEX) for r in rows]
    for i, t in enumerate(values):
        if not isinstance(t, int) or not 0 <= t < tablet_count:
            raise RowError(path, i, f" has {TABLET_INDEX}={t!r}; the table has {tablet_count} tablets")
    return values


def _num_rows(rows: ROWS) -> int:
    return rows.num_rows if isinstance(rows, pa.Table | pa.RecordBatch) else len(rows)


def split_by_tablet(table: pa.Table, tablets: list[int] | None, count: int) -> Iterator[tuple[int, pa.Table]]:
    if tablets is None:  # contiguous, even slices keep each tablet's rows in input order
        step = -(-table.num_rows // count)
        for t in range(count):
            part = table.slice(t * step, step)
            if part.num_rows:
                yield t, part
        return
    targets = sorted(set(tablets))
    if len(targets) == 1:  # the common case (a `tablet_index` argument): no copy
        yield targets[0], table
        return
    import pyarrow.compute as pc  # here, not at the top: ~60 ms to import, and readers never need it

    column = pa.array(tablets, pa.int64())
    for t in targets:
        yield t, table.filter(pc.equal(column, t))
